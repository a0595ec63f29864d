"""ERNIE's entity and phrase masking (bertlayers.pretraining_data.masking_units): the units found
in the text, their pieces equal to whole-sentence tokenization, and each unit masked whole."""

import numpy as np
import pytest

from bertlayers.pretraining_data.corpus import read_wikipedia_dump, wikipedia_excerpt_path
from bertlayers.pretraining_data.examples import create_examples
from bertlayers.pretraining_data.masking_units import (
    JoinedPiece,
    entity_runs,
    phrase_model,
    phrase_runs,
    sentence_units,
    word_spans,
)
from bertlayers.pretraining_data.mlm_masking import MaskingConfig, mask_example
from bertlayers.pretraining_data.objectives import masking_units, tokenize_documents, write_pretraining_data
from bertlayers.tokenizers import ModelTokenizer, bert_uncased_vocabulary
from bertlayers.tokenizers.vocabulary import VocabularyInfo


def run_texts(sentence, runs):
    words = word_spans(sentence)
    return [" ".join(core for _, _, core in words[first : last + 1]) for first, last in runs]


def test_entities_are_capitalized_runs_cut_at_punctuation():
    sentence = "In New York, the Bank of England met Vincent van Gogh and Paris (France) on Monday."
    assert run_texts(sentence, entity_runs(sentence)) == ["New York", "Bank of England", "Vincent van Gogh"]
    # A sentence's first word is a name's when it is not a function word; a connector never ends a name.
    assert run_texts("George Orwell of Motihari wrote.", entity_runs("George Orwell of Motihari wrote.")) == [
        "George Orwell of Motihari"
    ]
    assert entity_runs("The Bank of the year.") == [] and entity_runs("Alpha, Beta and Gamma.") == []
    segments = sentence_units(sentence, "entity")
    assert "".join(text for text, _ in segments) == sentence
    assert [text for text, is_unit in segments if is_unit] == ["New York", "Bank of England", "Vincent van Gogh"]


def test_phrases_are_the_corpus_collocations():
    filler = [f"word{i} other{i} thing{i % 7} said here" for i in range(60)]
    documents = [
        [f"They flew to new york on day {i}. {filler[i]}", f"The new york office, {filler[-i]}"] for i in range(30)
    ]
    phrases = phrase_model(documents, min_count=5, threshold=1.0)
    sentence = "Later we went to New York, then home."
    assert run_texts(sentence, phrase_runs(sentence, phrases)) == ["New York"]
    # A phrase across a comma is cut there: "york, then" would not be one unit.
    assert phrase_runs("we went to new, york", phrases) == []


@pytest.fixture(scope="module")
def documents():
    return read_wikipedia_dump(wikipedia_excerpt_path())[:4]


@pytest.fixture(scope="module")
def vocab():
    return VocabularyInfo.from_file(bert_uncased_vocabulary())


@pytest.mark.parametrize("strategy", ["entity", "phrase"])
def test_units_keep_whole_sentence_pieces_and_are_masked_whole(documents, vocab, strategy):
    tokenizer = ModelTokenizer.from_vocab_file(bert_uncased_vocabulary()).in_graph().tokenize
    plain = tokenize_documents(documents, tokenizer)
    config = MaskingConfig(strategy=strategy, max_predictions_per_seq=128)
    units = tokenize_documents(documents, tokenizer, masking_units(documents, config))
    # The same pieces as tokenizing each sentence whole: the units only mark which go together.
    assert [[list(map(int, s)) for s in d] for d in units] == plain
    joined = sum(isinstance(t, JoinedPiece) for d in units for s in d for t in s)
    assert joined > 100, joined

    examples = create_examples(units, vocab, 128, "single", rng=np.random.default_rng(0))
    rng = np.random.default_rng(1)
    masked_units = 0
    for example in examples:
        result = mask_example(example.token_ids, vocab, config, rng)
        chosen = set(result.positions)
        ids = example.token_ids
        for position in range(1, len(ids)):
            # A joined piece goes with the piece before it (unless a special token precedes it).
            if isinstance(ids[position], JoinedPiece) and ids[position - 1] not in vocab.never_masked_ids:
                assert (position in chosen) == (position - 1 in chosen), (position, strategy)
                masked_units += position in chosen and not isinstance(ids[position - 1], JoinedPiece)
        assert all(type(t) is int for t in result.token_ids + result.labels)
    assert masked_units > 5, masked_units


def test_entity_masked_records_are_written(documents, tmp_path):
    stats = write_pretraining_data(
        documents[:2],
        bert_uncased_vocabulary(),
        str(tmp_path),
        masking=MaskingConfig(strategy="entity"),
        dupe_factor=1,
        num_shards=1,
        verbose=False,
    )
    assert stats.examples > 10 and 0.1 < stats.masked / stats.tokens < 0.16


def test_the_strategies_are_refused_where_the_data_would_not_use_them():
    from bertlayers.runs.pretraining import PretrainingConfig

    with pytest.raises(ValueError, match=r"--masking entity: recipe 'roberta' masks each batch .* bert, albert"):
        PretrainingConfig(recipe="roberta", masking="entity")
    with pytest.raises(ValueError, match=r"--masking phrase: recipe 'spanbert' masks by span; give no --masking"):
        PretrainingConfig(recipe="spanbert", masking="phrase")
    assert PretrainingConfig(recipe="bert", masking="phrase").masking == "phrase"

"""Pretraining data: statistics on real Wikipedia text (≥ 50k tokens), determinism, TFRecords."""

import numpy as np
import pytest
import tensorflow as tf

from bertlayers.pretraining_data.corpus import (
    read_bert_format,
    read_corpus,
    read_wikipedia_dump,
    split_sentences,
    wikipedia_excerpt_path,
)
from bertlayers.pretraining_data.examples import create_examples
from bertlayers.pretraining_data.mlm_masking import MaskingConfig, clipped_geometric_pmf, mask_example
from bertlayers.pretraining_data.objectives import (
    dynamic_mask,
    pretraining_dataset,
    tokenize_documents,
    write_pretraining_data,
)
from bertlayers.pretraining_data.tfrecords import check_tfrecords
from bertlayers.tokenizers import ModelTokenizer, bert_uncased_vocabulary
from bertlayers.tokenizers.vocabulary import VocabularyInfo

SEQ = 128


@pytest.fixture(scope="module")
def vocab():
    return VocabularyInfo.from_file(bert_uncased_vocabulary())


@pytest.fixture(scope="module")
def documents():
    return read_wikipedia_dump(wikipedia_excerpt_path())[:40]


@pytest.fixture(scope="module")
def tokenized(documents):
    """The records' pieces, through the tokenizer a served text model runs (`write_pretraining_data`'s)."""
    return tokenize_documents(documents, ModelTokenizer.from_vocab_file(bert_uncased_vocabulary()).in_graph().tokenize)


@pytest.mark.slow(reason="the real Wikipedia excerpt tokenized by both implementations")
def test_the_records_pieces_are_keras_hubs_wordpiece_on_real_text(documents, tokenized):
    """Pretraining records and served requests tokenize through one implementation; on the real
    Wikipedia excerpt its pieces are keras-hub's `WordPieceTokenizer`'s (what the records were
    made with before) in all but 4 of 14,306 sentences, each over a character the two normalize
    or split apart ("…" as three pieces or "...", "′", a word with a curly apostrophe)."""
    from keras_hub_reference import wordpiece_tokenizer

    reference = wordpiece_tokenizer(bert_uncased_vocabulary())  # python lists in eager mode
    theirs = tokenize_documents(documents, lambda texts: tf.ragged.constant(reference(texts), tf.int32))
    pairs = [(a, b) for d, e in zip(theirs, tokenized) for a, b in zip(d, e)]
    assert len(pairs) == 14_306 and sum(a != b for a, b in pairs) == 4


@pytest.fixture(scope="module")
def nsp_examples(tokenized, vocab):
    examples = create_examples(tokenized, vocab, SEQ, "nsp", rng=np.random.default_rng(0))
    assert sum(len(e.token_ids) for e in examples) >= 50_000
    return examples


def masked(examples, vocab, strategy, seed=1):
    rng = np.random.default_rng(seed)
    config = MaskingConfig(strategy=strategy, max_predictions_per_seq=SEQ)
    return [(e, mask_example(e.token_ids, vocab, config, rng)) for e in examples]


def test_corpus_is_real_wikipedia(documents):
    words = sum(len(s.split()) for d in documents for s in d)
    assert words > 100_000
    assert documents[0][0].startswith("Anarchism is a political philosophy")


@pytest.mark.parametrize("strategy", ["token", "whole_word", "span"])
@pytest.mark.slow
def test_masking_rate_split_and_special_tokens(nsp_examples, vocab, strategy):
    special = set(vocab.never_masked_ids)
    maskable = chosen = to_mask = unchanged = 0
    for example, result in masked(nsp_examples, vocab, strategy):
        maskable += sum(t not in special for t in example.token_ids)
        chosen += len(result.positions)
        for position in result.positions:
            assert example.token_ids[position] not in special
            assert result.labels[result.positions.index(position)] == example.token_ids[position]
            new = result.token_ids[position]
            to_mask += new == vocab.mask_id
            unchanged += new == example.token_ids[position]
        assert all(result.token_ids[p] == t for p, t in enumerate(example.token_ids) if p not in result.positions)
    assert abs(chosen / maskable - 0.15) <= 0.015, chosen / maskable
    # 80/10/10 drawn per token for every strategy (SpanBERT's code's `word_piece` replacement).
    assert abs(to_mask / chosen - 0.8) <= 0.015
    assert abs(unchanged / chosen - 0.1) <= 0.015
    assert abs((chosen - to_mask - unchanged) / chosen - 0.1) <= 0.015


def test_whole_word_masking_never_masks_part_of_a_word(nsp_examples, vocab):
    for strategy in ("whole_word", "span"):
        for example, result in masked(nsp_examples, vocab, strategy):
            chosen = set(result.positions)
            special = set(vocab.never_masked_ids)
            for position in chosen:
                # The piece before a continuation, and the continuation after a piece, are chosen
                # too (a segment cut mid-word may start with a "##" piece: that piece is a word).
                previous = example.token_ids[position - 1]
                if vocab.is_continuation[example.token_ids[position]] and previous not in special:
                    assert position - 1 in chosen
                if position + 1 < len(example.token_ids) and vocab.is_continuation[example.token_ids[position + 1]]:
                    assert position + 1 in chosen


def test_token_masking_splits_words_sometimes(nsp_examples, vocab):
    partial = 0
    for example, result in masked(nsp_examples, vocab, "token"):
        chosen = set(result.positions)
        partial += any(vocab.is_continuation[example.token_ids[p]] and p - 1 not in chosen and p > 1 for p in chosen)
    assert partial > 0  # so the whole-word test above can fail


def test_span_lengths_follow_the_clipped_geometric_distribution(nsp_examples, vocab):
    spans = [span for _, r in masked(nsp_examples, vocab, "span") for span in r.spans]
    drawn = np.array([d for _, _, _, d in spans])
    assert len(drawn) > 1000
    pmf = clipped_geometric_pmf(0.2, 10)
    observed = np.bincount(drawn, minlength=11)[1:] / len(drawn)
    np.testing.assert_allclose(observed, pmf, atol=0.02)
    assert abs(drawn.mean() - np.sum(np.arange(1, 11) * pmf)) <= 0.2
    # Only a span cut to fit the 15% budget is shorter than drawn: at most one per example.
    kept = np.array([n for _, _, n, _ in spans])
    assert np.all(kept <= drawn) and np.mean(kept < drawn) < 0.25


@pytest.mark.parametrize("mode", ["nsp", "sop"])
def test_sentence_label_balance_and_packing(tokenized, vocab, mode):
    examples = create_examples(tokenized, vocab, SEQ, mode, rng=np.random.default_rng(3))
    labels = np.array([e.label for e in examples])
    assert abs(labels.mean() - 0.5) <= 0.03, labels.mean()
    for e in examples:
        assert len(e.token_ids) <= SEQ and e.token_ids[0] == vocab.cls_id and e.token_ids[-1] == vocab.sep_id
        assert e.token_ids.count(vocab.sep_id) == 2 and 1 in e.segment_ids
        first_b = e.segment_ids.index(1)
        assert e.token_ids[first_b - 1] == vocab.sep_id


def test_sop_pairs_are_consecutive_segments(vocab):
    document = [[1000 + i] * 3 for i in range(40)]  # sentence i is three copies of id 1000+i
    examples = create_examples([document, document], vocab, 16, "sop", short_seq_prob=0.0, rng=np.random.default_rng(0))
    for e in examples:
        b = e.segment_ids.index(1)
        a_last, b_first = e.token_ids[b - 2], e.token_ids[b]
        # In order: B starts where A ends (+1 sentence id); swapped (label 1): A follows B.
        assert (b_first > a_last) == (e.label == 0)


def test_single_segment_mode_packs_full_sentences(tokenized, vocab):
    examples = create_examples(tokenized, vocab, SEQ, "single", short_seq_prob=0.0, rng=np.random.default_rng(0))
    lengths = [len(e.token_ids) for e in examples]
    assert np.mean(lengths) > 0.8 * SEQ and max(lengths) <= SEQ  # whole sentences: about half of one is left over
    assert all(set(e.segment_ids) == {0} for e in examples)


def test_short_sequences_are_drawn_with_short_seq_prob(tokenized, vocab):
    long = create_examples(tokenized, vocab, SEQ, "nsp", short_seq_prob=0.0, rng=np.random.default_rng(0))
    short = create_examples(tokenized, vocab, SEQ, "nsp", short_seq_prob=0.5, rng=np.random.default_rng(0))
    assert np.mean([len(e.token_ids) for e in short]) < 0.85 * np.mean([len(e.token_ids) for e in long])


# --- TFRecords ----------------------------------------------------------------------------------

# google-research/bert run_pretraining.py's name_to_features, written out here independently.
ORIGINAL_SPEC = {
    "input_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
    "input_mask": tf.io.FixedLenFeature([SEQ], tf.int64),
    "segment_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
    "masked_lm_positions": tf.io.FixedLenFeature([20], tf.int64),
    "masked_lm_ids": tf.io.FixedLenFeature([20], tf.int64),
    "masked_lm_weights": tf.io.FixedLenFeature([20], tf.float32),
    "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
}


@pytest.fixture(scope="module")
def small_documents(documents):
    return documents[:6]


def write(documents, directory, seed=7, **kwargs):
    return write_pretraining_data(
        documents,
        bert_uncased_vocabulary(),
        str(directory),
        masking=MaskingConfig(),
        dupe_factor=1,
        num_shards=2,
        seed=seed,
        verbose=False,
        **kwargs,
    )


def test_tfrecords_round_trip_with_the_original_feature_spec(small_documents, tmp_path, vocab):
    stats = write(small_documents, tmp_path)
    records = [r for f in stats.files for r in tf.data.TFRecordDataset(f)]
    assert len(records) == stats.examples
    parsed = tf.io.parse_example(tf.stack(records), ORIGINAL_SPEC)
    ids, mask, weights = parsed["input_ids"].numpy(), parsed["input_mask"].numpy(), parsed["masked_lm_weights"].numpy()
    lengths = mask.sum(1)
    assert int(lengths.sum()) == stats.tokens and int(weights.sum()) == stats.masked
    assert np.all(ids[:, 0] == vocab.cls_id)
    for row, length in enumerate(lengths):
        assert ids[row, length - 1] == vocab.sep_id and np.all(ids[row, length:] == 0)
        n = int(weights[row].sum())
        positions = parsed["masked_lm_positions"].numpy()[row, :n]
        assert np.all(positions < length) and np.all(np.diff(positions) > 0)
    assert set(np.unique(parsed["next_sentence_labels"].numpy())) == {0, 1}


def test_same_seed_gives_identical_records(small_documents, tmp_path):
    first = write(small_documents, tmp_path / "a", seed=7)
    second = write(small_documents, tmp_path / "b", seed=7)
    other = write(small_documents, tmp_path / "c", seed=8)
    read = lambda stats: [open(f, "rb").read() for f in stats.files]  # noqa: E731
    assert read(first) == read(second)
    assert read(first) != read(other)


def test_corrupt_and_mismatched_files_are_named(small_documents, tmp_path):
    stats = write(small_documents, tmp_path)
    assert sum(check_tfrecords(stats.files, SEQ, 20).values()) == stats.examples
    with pytest.raises(
        ValueError,
        match=r"pretrain-00000-of-00002.tfrecord: feature input_ids has length 128, but the run expects 64 \(sequence_length\)",
    ):
        check_tfrecords(stats.files, 64, 20)
    with pytest.raises(
        ValueError,
        match=r"feature masked_lm_positions has length 20, but the run expects 30 \(max_predictions_per_seq\)",
    ):
        check_tfrecords(stats.files, SEQ, 30)
    data = open(stats.files[1], "rb").read()
    open(stats.files[1], "wb").write(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"pretrain-00001-of-00002.tfrecord is corrupt after \d+ records"):
        check_tfrecords(stats.files, SEQ, 20)
    alien = tmp_path / "alien.tfrecord"
    with tf.io.TFRecordWriter(str(alien)) as writer:
        writer.write(tf.train.Example().SerializeToString())
    with pytest.raises(ValueError, match=r"alien.tfrecord: records lack the features"):
        check_tfrecords([str(alien)], SEQ, 20)


def test_dataset_batches_have_static_shapes_and_normalized_weights(small_documents, tmp_path):
    stats = write(small_documents, tmp_path)
    dataset = pretraining_dataset(stats.files, 8, SEQ, 20, objective="mlm_nsp")
    x, y, weights = next(iter(dataset))
    assert dataset.element_spec[0]["token_ids"].shape == (8, SEQ)
    assert tuple(x["masked_positions"].shape) == (8, 20) and tuple(y["nsp"].shape) == (8,)
    # Mean weight 1 over the batch: Keras's mean reduction then equals BERT's Σ w·loss / Σ w.
    assert abs(float(tf.reduce_mean(weights["mlm"])) - 1.0) < 1e-5


def test_dynamic_masking_redraws_each_epoch_and_is_deterministic(tokenized, vocab):
    examples = create_examples(tokenized[:20], vocab, SEQ, "single", rng=np.random.default_rng(0))
    token_ids = np.zeros((len(examples), SEQ), "int32")
    for row, e in enumerate(examples):
        token_ids[row, : len(e.token_ids)] = e.token_ids
    padding = (token_ids != 0).astype("int32")
    config = MaskingConfig(max_predictions_per_seq=SEQ)
    first = dynamic_mask(token_ids, padding, tf.constant([0, 5], tf.int64), vocab, config)
    again = dynamic_mask(token_ids, padding, tf.constant([0, 5], tf.int64), vocab, config)
    later = dynamic_mask(token_ids, padding, tf.constant([0, 6], tf.int64), vocab, config)
    np.testing.assert_array_equal(first[0], again[0])
    assert not np.array_equal(first[1], later[1])
    masked_ids, positions, labels, weights = (np.asarray(t) for t in first)
    maskable = np.isin(token_ids, vocab.never_masked_ids, invert=True) & (padding == 1)
    assert abs(weights.sum() / maskable.sum() - 0.15) <= 0.015
    chosen = positions[weights == 1]
    rows = np.nonzero(weights == 1)[0]
    assert np.all(maskable[rows, chosen])
    np.testing.assert_array_equal(labels[weights == 1], token_ids[rows, chosen])
    replaced = masked_ids[rows, chosen]
    assert abs(np.mean(replaced == vocab.mask_id) - 0.8) <= 0.03


def test_bert_format_and_sentence_splitting(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("First sentence.\nSecond one.\n\nOther document.\n")
    assert read_bert_format(str(path)) == [["First sentence.", "Second one."], ["Other document."]]
    assert split_sentences("Dr. Smith went home. He slept! Did he? Yes.") == [
        "Dr. Smith went home.",
        "He slept!",
        "Did he?",
        "Yes.",
    ]


def test_corpus_formats_by_name_and_auto(tmp_path, caplog):
    """A document per line stays a document per line: "auto" never reads a many-line file
    without blank lines as one document; the counts are logged before records are made."""
    lines = [f"Document {i} opens here. It has a second sentence." for i in range(120)]
    path = tmp_path / "reviews.txt"
    path.write_text("\n".join(lines) + "\n")
    with caplog.at_level("INFO", logger="bertlayers"):
        documents = read_corpus(str(path))
    assert len(documents) == 120 and documents[7] == ["Document 7 opens here.", "It has a second sentence."]
    assert "120 documents, 240 sentences (format 'text' (auto))" in caplog.text
    assert read_corpus(str(path), "text") == documents
    # Read as BERT's format on request: one document of 120 sentences, with a warning.
    caplog.clear()
    with caplog.at_level("INFO", logger="bertlayers"):
        assert [len(d) for d in read_corpus(str(path), "bert")] == [120]
    assert "reads as a single document" in caplog.text
    # Blank lines between documents: BERT's format.
    bert = tmp_path / "bert.txt"
    bert.write_text("\nOne.\nTwo.\n\n\nThree.\n\n")
    assert read_corpus(str(bert)) == [["One.", "Two."], ["Three."]]
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text('{"text": "A first. A second."}\n{"text": "B."}\n')
    assert read_corpus(str(jsonl)) == [["A first.", "A second."], ["B."]]
    with pytest.raises(ValueError, match="Unknown corpus format 'csv'"):
        read_corpus(str(path), "csv")

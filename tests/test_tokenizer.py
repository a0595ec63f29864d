"""WordPiece through keras-hub / tensorflow-text on the real bert-base-uncased vocabulary."""

import numpy as np
import pytest

from bertlayers.data import BertInputPacker, bert_uncased_vocabulary, load_vocabulary, wordpiece_tokenizer

FOX_IDS = [101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899, 1012, 102]


def test_stack_imports_together():
    import keras_hub
    import tensorflow_text

    assert keras_hub.__version__ == "0.32.0"
    assert tensorflow_text.__version__.startswith("2.21")


@pytest.fixture(scope="module")
def tokenizer():
    return wordpiece_tokenizer(bert_uncased_vocabulary())


def test_real_vocabulary():
    vocabulary = load_vocabulary(bert_uncased_vocabulary())
    assert len(vocabulary) == 30522
    assert [vocabulary.index(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [0, 100, 101, 102, 103]


def test_known_sentence_ids(tokenizer):
    packed = BertInputPacker(tokenizer, sequence_length=16)("The quick brown fox jumps over the lazy dog.")
    assert packed["token_ids"][0, : len(FOX_IDS)].tolist() == FOX_IDS
    assert packed["token_ids"][0, len(FOX_IDS) :].tolist() == [0] * (16 - len(FOX_IDS))
    assert packed["padding_mask"][0].tolist() == [1] * len(FOX_IDS) + [0] * (16 - len(FOX_IDS))


def test_pair_packing_and_truncation(tokenizer):
    packer = BertInputPacker(tokenizer, sequence_length=8)
    packed = packer(["hello world"], ["a much longer second sentence here"])
    ids, segments = packed["token_ids"][0], packed["segment_ids"][0]
    assert ids[0] == 101 and list(ids).count(102) == 2 and ids[-1] == 102
    # [CLS] hello world [SEP] | a much longer [SEP]: waterfall truncation cuts the second text.
    assert segments.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert packed["token_ids"].dtype == np.int32


def test_vocabulary_without_special_tokens(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("a\nb\n")
    with pytest.raises(ValueError, match=r"lacks the special tokens .*\[PAD\]"):
        load_vocabulary(str(path))

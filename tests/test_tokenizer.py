"""WordPiece on the real bert-base-uncased vocabulary: the packer training uses (`ModelTokenizer.packer`)
against BERT's known ids and keras-hub's packer, and the in-graph tokenizer against keras-hub's."""

import numpy as np
import pytest
from keras_hub_reference import keras_hub_packer, wordpiece_tokenizer

from bertlayers.tokenizers import bert_uncased_vocabulary, load_vocabulary, model_tokenizer

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


def test_known_sentence_ids():
    packed = model_tokenizer(bert_uncased_vocabulary()).packer(16)("The quick brown fox jumps over the lazy dog.")
    assert packed["token_ids"][0, : len(FOX_IDS)].tolist() == FOX_IDS
    assert packed["token_ids"][0, len(FOX_IDS) :].tolist() == [0] * (16 - len(FOX_IDS))
    assert packed["padding_mask"][0].tolist() == [1] * len(FOX_IDS) + [0] * (16 - len(FOX_IDS))


def test_pair_packing_and_truncation():
    packer = model_tokenizer(bert_uncased_vocabulary()).packer(8)
    pair = (["hello world", "a much longer first sentence here"], ["a much longer second sentence here", "yes"])
    packed = packer(*pair)
    reference = keras_hub_packer(bert_uncased_vocabulary(), 8)(*pair)
    for name in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal(packed[name], reference[name], err_msg=name)
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


TRICKY = [
    "The quick brown fox jumps over the lazy dog.",
    "Zürich's café—open late! Naïve “quotes” ¿Qué?",
    "日本語のテキスト 中文分词",  # CJK ideographs are words of their own; kana are not
    "emoji 😀 tab\tnew\nline don't $5.00 50% #tag",
    "supercalifragilisticexpialidocious" * 4,  # longer than WordPiece's word limit: [UNK]
    "",
]


def test_served_tokenizer_matches_the_training_tokenizer(tokenizer):
    """The exported text models' in-graph tokenizer gives keras-hub's ids; its word-edge flags
    mark where each word's pieces begin and end, and its offsets are bytes of the original."""
    import tensorflow as tf

    from bertlayers.tokenizers.wordpiece import InGraphTokenizer

    served = InGraphTokenizer(bert_uncased_vocabulary())
    ids, starts, ends, starts_word, ends_word = served.tokenize_with_offsets(tf.constant(TRICKY))
    assert ids.to_list() == [[int(i) for i in row] for row in tokenizer(TRICKY)]
    assert served.tokenize(tf.constant(TRICKY)).to_list() == ids.to_list()
    assert ids.to_list()[2][:3] == [1864, 1876, 1950]  # 日 本 語, each a word
    for row, begins, finishes in zip(ids.to_list(), starts_word.to_list(), ends_word.to_list()):
        begins_expected = [not tokenizer.id_to_token(i).startswith("##") for i in row]
        assert begins == begins_expected and finishes == begins_expected[1:] + [True] * bool(row)
    fox = TRICKY[0]
    words = [fox[s:e].lower() for s, e in zip(starts.to_list()[0], ends.to_list()[0])]
    assert words == [tokenizer.id_to_token(i) for i in ids.to_list()[0]]
    zurich = TRICKY[1].encode("utf-8")
    cafe = [tokenizer.id_to_token(i) for i in ids.to_list()[1]].index("cafe")
    assert zurich[starts.to_list()[1][cafe] : ends.to_list()[1][cafe]].decode("utf-8") == "café"


def test_whitespace_tokens_of_a_trained_vocabulary_are_never_pieces(tmp_path):
    """tensorflow-text's vocabulary trainer writes " " and "## " as tokens; BERT's tokenizer splits
    words at whitespace first and never gives them (transformers' BertTokenizer: the reference),
    where FastWordpiece alone gave "## " inside words (the served ids then differed from training's
    for every such vocabulary). The library's trainer leaves them out."""
    import tensorflow as tf
    from transformers import BertTokenizer

    from bertlayers.tokenizers.vocabulary import build_wordpiece_vocabulary
    from bertlayers.tokenizers.wordpiece import InGraphTokenizer

    vocabulary = tmp_path / "vocab.txt"
    vocabulary.write_text("\n".join([*load_vocabulary(bert_uncased_vocabulary()), " ", "## "]) + "\n")
    texts = ["The quick brown fox jumps over the lazy dog.", "Zürich's café—open late!", "a b  c"]
    reference = BertTokenizer(str(vocabulary), do_lower_case=True)
    expected = [reference.convert_tokens_to_ids(reference.tokenize(text)) for text in texts]
    assert InGraphTokenizer(str(vocabulary)).tokenize(tf.constant(texts)).to_list() == expected
    trained = build_wordpiece_vocabulary([texts * 3], 60, str(tmp_path / "trained.txt"))
    assert trained[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert not [token for token in trained if any(c.isspace() for c in token)]
    # The same file every run (the trainer's order of equal counts varies by process), and every
    # training text tokenized in the graph without an unknown piece.
    assert build_wordpiece_vocabulary([texts * 3], 60, str(tmp_path / "again.txt")) == trained
    ids = InGraphTokenizer(str(tmp_path / "trained.txt")).tokenize(tf.constant(texts)).to_list()
    assert all(1 not in row for row in ids), ids


def test_served_tokenizing_and_packing_is_a_small_graph():
    """A batch-1 request pays for every node the text signature runs before the encoder: one
    tokenizer kernel and dense packing keep that near a hundred (ragged concatenation with its
    checks took thousands)."""
    import tensorflow as tf

    from bertlayers.tokenizers.wordpiece import InGraphTokenizer

    served = InGraphTokenizer(bert_uncased_vocabulary())

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
    def tokenize_and_pack(first, second):
        return served.layout.pack(
            served.tokenize(first), served.tokenize(second), 128, truncation="waterfall", truncate=False
        )

    graph = tokenize_and_pack.get_concrete_function().graph.as_graph_def()
    nodes = len(graph.node) + sum(len(f.node_def) for f in graph.library.function)
    assert nodes < 250, nodes
    token_ids, segment_ids, padding_mask = tokenize_and_pack(tf.constant(["hello world"]), tf.constant(["yes"]))
    assert token_ids.numpy().tolist() == [[101, 7592, 2088, 102, 2748, 102]]
    assert segment_ids.numpy().tolist() == [[0, 0, 0, 0, 1, 1]] and padding_mask.numpy().min() == 1

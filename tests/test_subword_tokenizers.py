"""Byte-level BPE and SentencePiece checkpoints' tokenizers and layouts against transformers'
fast tokenizers read from the same files, on 2,515 real sentences (tests/subword_files.py)."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from subword_files import FAMILIES, check_sentences, reference_tokenizer, write_tokenizer_folder

from bertlayers.tokenizers.checkpoint_tokenizer import checkpoint_tokenizer


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    import bertlayers.families  # noqa: F401  (XLNet registers its tokenizer)

    root = tmp_path_factory.mktemp("tokenizers")
    return {family: write_tokenizer_folder(str(root / family), family) for family in FAMILIES}


def _is_a_tie(reference, ours, theirs):
    """Whether two segmentations are equally likely under the unigram model: the same
    pieces' text, the same summed score (SentencePiece and tokenizers break such ties apart)."""
    model = reference.backend_tokenizer.model
    vocab = json.loads(reference.backend_tokenizer.to_str())["model"]["vocab"]
    score = lambda ids: sum(vocab[i][1] for i in ids)  # noqa: E731
    pieces = lambda ids: "".join(vocab[i][0] for i in ids)  # noqa: E731
    return (
        type(model).__name__ == "Unigram" and pieces(ours) == pieces(theirs) and np.isclose(score(ours), score(theirs))
    )


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_ids_equal_transformers_on_real_sentences(folders, family):
    texts = check_sentences()
    ours = checkpoint_tokenizer(folders[family]).tokenizer.tokenize(tf.constant(texts)).to_list()
    reference = reference_tokenizer(folders[family])
    theirs = reference(texts, add_special_tokens=False)["input_ids"]
    assert len(texts) >= 2000
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    # SentencePiece's kernels and transformers' Unigram break ties between equally likely
    # segmentations ("0" "00" against "00" "0") each their own way; nothing else may differ.
    untied = [i for i in differ if not _is_a_tie(reference, ours[i], theirs[i])]
    assert not untied, [(texts[i], ours[i], theirs[i]) for i in untied[:3]]
    assert len(differ) <= len(texts) // 200, len(differ)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_pairs_layout_and_truncation_equal_transformers(folders, family):
    texts = check_sentences()
    firsts, seconds = texts[:600:2], texts[1:600:2]
    ours = checkpoint_tokenizer(folders[family])
    reference = reference_tokenizer(folders[family])
    for length in (512, 24):  # whole pairs, and pairs cut token by token from the longer text
        packed = ours.encode(firsts, seconds, sequence_length=length)
        theirs = reference(firsts, seconds, truncation=True, max_length=length, return_token_type_ids=True)
        for row, (ids, segments) in enumerate(zip(theirs["input_ids"], theirs["token_type_ids"])):
            real = packed["padding_mask"][row] == 1
            if ours.layout.pad_left:  # XLNet's real tokens end each row
                assert real[-1] or not real.any()
            got = packed["token_ids"][row][real].tolist()
            assert got == ids or _is_a_tie(reference, got, ids), (family, row)
            assert packed["segment_ids"][row][real].tolist() == segments, (family, row)
            assert (packed["token_ids"][row][~real] == ours.layout.pad_id).all()
        single = ours.encode(firsts[:50], sequence_length=length)
        want = reference(firsts[:50], truncation=True, max_length=length)["input_ids"]
        assert [t[m == 1].tolist() for t, m in zip(single["token_ids"], single["padding_mask"])] == want


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_the_served_graph_gives_the_python_paths_ids(folders, family, tmp_path):
    """Tokenize and pack inside a SavedModel, loaded back in this process: the same arrays."""
    ours = checkpoint_tokenizer(folders[family])
    module = tf.Module()
    module.tokenizer = ours.tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
    def serve(first, second):
        return ours.layout.pack(ours.tokenizer.tokenize(first), ours.tokenizer.tokenize(second), 64)

    tf.saved_model.save(module, str(tmp_path / "m"), signatures={"serving_default": serve})
    served = tf.saved_model.load(str(tmp_path / "m")).signatures["serving_default"]
    texts = check_sentences()[-60:]
    got = served(first=tf.constant(texts[:30]), second=tf.constant(texts[30:]))
    want = ours.encode(texts[:30], texts[30:], sequence_length=64)
    for index, name in enumerate(("token_ids", "segment_ids", "padding_mask")):
        np.testing.assert_array_equal(got[f"output_{index}"].numpy(), want[name])


@pytest.mark.slow
def test_a_sentencepiece_tokenizer_outlives_a_seed_being_set(folders):
    """Setting a seed drops eager TensorFlow's cached kernels; tensorflow-text's SentencePiece
    model belonged to its kernel, so a tokenizer made before `keras.utils.set_random_seed` failed
    after it ("Resource ... SentencepieceOp ... does not exist")."""
    import keras

    tokenizer = checkpoint_tokenizer(folders["albert"]).tokenizer
    before = tokenizer.tokenize(tf.constant(["a seed is set"])).to_list()
    keras.utils.set_random_seed(0)
    assert tokenizer.tokenize(tf.constant(["a seed is set"])).to_list() == before


@pytest.mark.slow
def test_tokenizer_files_that_do_not_fit_are_named(folders, tmp_path):
    import shutil

    # Tokenizer files of another size than the config's vocab_size.
    other = tmp_path / "other"
    shutil.copytree(folders["albert"], other)
    with open(other / "config.json", "w") as f:
        json.dump({"model_type": "albert", "vocab_size": 1200}, f)
    with pytest.raises(
        ValueError,
        match=r"has 1000 tokens but config.json says vocab_size 1200: the tokenizer files belong to another checkpoint",
    ):
        checkpoint_tokenizer(str(other))
    # A folder with no tokenizer files.
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(os.path.join(folders["roberta"], "config.json"), bare)
    with pytest.raises(FileNotFoundError, match=r"has no vocab.json: a roberta checkpoint's tokenizer needs it"):
        checkpoint_tokenizer(str(bare))
    # A merges.txt that does not parse, and one that does not belong to its vocab.json.
    broken = tmp_path / "broken"
    shutil.copytree(folders["roberta"], broken)
    with open(broken / "merges.txt", "a", encoding="utf-8") as f:
        f.write("onlyonetoken\n")
    with pytest.raises(ValueError, match=r"merges.txt:\d+: expected a merge 'left right', got 'onlyonetoken'"):
        checkpoint_tokenizer(str(broken))
    with open(broken / "merges.txt", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\nq z\n")
    with pytest.raises(
        ValueError, match=r"merges into pieces .*vocab.json lacks \('qz'\): the files do not belong together"
    ):
        checkpoint_tokenizer(str(broken))
    # A SentencePiece model file that is not one.
    corrupt = tmp_path / "corrupt"
    shutil.copytree(folders["xlnet"], corrupt)
    (corrupt / "spiece.model").write_bytes(b"not a model")
    with pytest.raises(ValueError, match=r"spiece.model is not a SentencePiece model"):
        checkpoint_tokenizer(str(corrupt))
    # An unsupported model_type names the supported ones.
    with open(other / "config.json", "w") as f:
        json.dump({"model_type": "gpt2", "vocab_size": 1000}, f)
    with pytest.raises(
        ValueError,
        match=(
            r"no tokenizer for model_type 'gpt2'; supported: albert, bert, deberta-v2, distilbert, electra, eurobert, gemma3_text, gte, "
            r"modernbert, nomic_bert, qwen3, roberta, xlm-roberta, xlnet"
        ),
    ):
        checkpoint_tokenizer(str(other))


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_ner_words_map_to_their_first_piece_as_transformers_aligns_them(folders, family):
    """WNUT tweets as word lists: our pieces and each word's first piece equal transformers'
    `is_split_into_words` encoding and its `word_ids()` (RoBERTa's words get their space, "Ġ";
    SentencePiece's their "▁")."""
    from subword_files import real_sentences

    from bertlayers.task_data.ner import encode_sentences

    ours = checkpoint_tokenizer(folders[family])
    reference = (
        reference_tokenizer(folders[family], add_prefix_space=True)
        if family == "roberta"
        else reference_tokenizer(folders[family])
    )
    sentences = [[(word, "O") for word in sentence.split(" ")] for sentence in real_sentences()["wnut"][:300]]
    inputs, _, weights, starts = encode_sentences(sentences, ours, 192, ["O"], "wnut")
    ties = 0
    for row, sentence in enumerate(sentences):
        encoded = reference([word for word, _ in sentence], is_split_into_words=True)
        real = inputs["padding_mask"][row] == 1
        got = inputs["token_ids"][row][real].tolist()
        if got != encoded["input_ids"]:  # only a tie of equally likely segmentations may differ
            assert _is_a_tie(reference, got, encoded["input_ids"]), (family, row)
            ties += 1
            continue
        word_ids = encoded.word_ids()
        first = [word_ids.index(k) for k in range(len(sentence))]
        offset = int(np.argmax(real))  # XLNet's rows start after their left padding
        assert starts[row] == [offset + i for i in first], (family, row)
        assert weights[row].sum() == len(sentence)
    assert ties <= 2, ties


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_squad_windows_in_the_family_layout_with_answers_on_word_spans(folders, family):
    """The project's SQuAD file windowed for each family: a whole (question, context) window has
    transformers' ids for the pair (the family's layout and segments), and every answer's target
    covers the gold answer with whole words."""
    from bertlayers.task_data.squad import make_windows, read_squad

    examples = [
        e
        for e in read_squad(
            os.path.join(os.path.dirname(__file__), "..", "examples", "data", "squad_mini", "dev-v2.0.json")
        )
        if not e.is_impossible
    ]
    ours = checkpoint_tokenizer(folders[family])
    reference = reference_tokenizer(folders[family])
    features = make_windows(examples, ours, sequence_length=384, doc_stride=128)
    assert len(features.example_index) == len(examples)  # one window each at this length
    for window, example in enumerate(examples):
        real = features.inputs["padding_mask"][window] == 1
        encoded = reference(example.question, example.context, return_token_type_ids=True)
        got = features.inputs["token_ids"][window][real].tolist()
        assert got == encoded["input_ids"] or _is_a_tie(reference, got, encoded["input_ids"]), (family, example.qid)
        assert features.inputs["segment_ids"][window][real].tolist() == encoded["token_type_ids"], (family, example.qid)
        start, end = features.start_positions[window], features.end_positions[window]
        spans = features.token_spans[window]
        covered = example.context[spans[start][0] : spans[end][1]]
        text, first = example.answers[0]
        assert text in covered and spans[start][0] <= first and first + len(text) <= spans[end][1], (
            family,
            example.qid,
        )
        assert not covered[0].isspace() and not covered[-1].isspace()


@pytest.mark.slow
def test_keras_hubs_byte_pair_tokenizer_is_not_the_reference_ours_matches(folders):
    """Why byte-level BPE is ours and not keras-hub's `BytePairTokenizer`: keras-hub 0.32
    approximates GPT-2's lookahead and splits some real text otherwise than transformers (a
    contraction after a space, " 's", for one), where ours agrees (the test above)."""
    import keras_hub

    folder = folders["roberta"]
    keras_hubs = keras_hub.tokenizers.BytePairTokenizer(
        vocabulary=os.path.join(folder, "vocab.json"), merges=os.path.join(folder, "merges.txt")
    )
    reference = reference_tokenizer(folder)
    ours = checkpoint_tokenizer(folder).tokenizer
    text = "It 's the view from where I 'm living ."
    want = reference(text, add_special_tokens=False)["input_ids"]
    assert ours.tokenize(tf.constant([text])).to_list()[0] == want
    assert [int(i) for i in keras_hubs(tf.constant([text]))[0]] != want


def test_layouts_pack_special_tokens_segments_padding_and_truncation():
    """The layouts on hand-made ids: RoBERTa's `<s> A </s></s> B </s>` in one segment, XLNet's
    `A <sep> B <sep> <cls>` padded on the left, and transformers' longest-first truncation
    (the shorter text keeps up to half the room, the first on a tie)."""
    from bertlayers.families.roberta.tokenizer import roberta_input_layout
    from bertlayers.families.xlnet.tokenizer import xlnet_input_layout

    first = tf.ragged.constant([[10, 11, 12], [20]], tf.int32)
    second = tf.ragged.constant([[30], [40, 41]], tf.int32)
    token_ids, segment_ids, mask = roberta_input_layout(0, 2, 1).pack(first, second, 16)
    assert token_ids.numpy().tolist() == [[0, 10, 11, 12, 2, 2, 30, 2], [0, 20, 2, 2, 40, 41, 2, 1]]
    assert segment_ids.numpy().sum() == 0 and mask.numpy().tolist()[1] == [1] * 7 + [0]
    token_ids, segment_ids, mask = xlnet_input_layout(4, 3, 5).pack(first, second, 16)
    assert token_ids.numpy().tolist() == [[10, 11, 12, 4, 30, 4, 3], [5, 20, 4, 40, 41, 4, 3]]
    assert segment_ids.numpy().tolist() == [[0, 0, 0, 0, 1, 1, 2], [0, 0, 0, 1, 1, 1, 2]]
    assert mask.numpy().tolist()[1] == [0] + [1] * 6
    # Room 7 for a pair of 6 and 6 pieces: the first keeps 3, the second 4.
    long = tf.ragged.constant([[1, 2, 3, 4, 5, 6]], tf.int32)
    token_ids, _, _ = roberta_input_layout(0, 2, 1).pack(long, long + 10, 11)
    assert token_ids.numpy().tolist() == [[0, 1, 2, 3, 2, 2, 11, 12, 13, 14, 2]]
    with pytest.raises(tf.errors.InvalidArgumentError, match="more tokens than the exported sequence_length 11"):
        roberta_input_layout(0, 2, 1).pack(long, long, 11, truncate=False)


def test_byte_level_bpe_files_are_checked_by_name(tmp_path):
    from bertlayers.tokenizers.byte_level_bpe import ByteLevelBPE, bytes_to_unicode

    vocab = {char: i for i, char in enumerate(bytes_to_unicode().values())}
    vocab.update({"ab": 256, "Ġab": 257})  # "Ġ" (the space byte) is among the bytes already
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b\nĠ ab\n")
    bpe = ByteLevelBPE.from_files(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
    assert bpe.tokenize(tf.constant(["ab ab"])).to_list() == [[256, 257]]
    (tmp_path / "vocab.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="is not a byte-level BPE vocabulary"):
        ByteLevelBPE.from_files(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))

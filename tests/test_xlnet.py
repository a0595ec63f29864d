"""XLNet: parity with transformers' XLNetModel / XLNetLMHeadModel (fixture recorded by
tests/fixtures/record_xlnet_reference.py), the relative shift and the two streams' masks
against direct computations, and a tiny model pretrained on the real Wikipedia excerpt,
resumed, fine-tuned and served."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from pretraining_fixtures import PREDICTIONS, SEQ, fine_tune_export_and_serve, tiny_family_run

from bertlayers.families.xlnet import (
    TARGET_FEATURE,
    RelativeAttention,
    TwoStreamMasks,
    XLNetEncoder,
    XLNetPretrainer,
    choose_plm_targets,
    factorization_masks,
    load_huggingface_xlnet,
    plm_objective,
    relative_shift,
    xlnet_layout,
)
from bertlayers.layers.pooler import Pooler
from bertlayers.pretraining_data.tfrecords import parse_records
from bertlayers.tokenizers.vocabulary import VocabularyInfo

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
SEP, CLS = 3, 2


@pytest.fixture(scope="module")
def reference():
    return np.load(os.path.join(FIXTURES, "xlnet_reference.npz"))


@pytest.fixture(scope="module")
def converted():
    return load_huggingface_xlnet(os.path.join(FIXTURES, "xlnet_tiny"))


def encoder_inputs(reference):
    return {name: reference[name] for name in ("token_ids", "segment_ids", "padding_mask")}


def test_content_stream_and_two_stream_logits_match_transformers(reference, converted):
    assert isinstance(converted, XLNetPretrainer)
    inputs = encoder_inputs(reference)
    content = converted.encoder(inputs)["sequence_output"]
    np.testing.assert_allclose(content, reference["content"], atol=1e-4)
    logits = converted({**inputs, "perm_mask": reference["perm_mask"], "target_mapping": reference["target_mapping"]})[
        "plm"
    ]
    np.testing.assert_allclose(logits, reference["logits"], atol=1e-4)


def test_bad_two_stream_inputs_are_named(reference, converted):
    inputs = encoder_inputs(reference)
    with pytest.raises(ValueError, match=r"perm_mask must have rank 3 \(\[batch, \?, \?\]\), got shape \(3, 12\)"):
        converted({**inputs, "perm_mask": reference["perm_mask"][:, 0], "target_mapping": reference["target_mapping"]})
    with pytest.raises(ValueError, match=r"target_mapping must have rank 3"):
        converted({**inputs, "perm_mask": reference["perm_mask"], "target_mapping": reference["target_mapping"][:, 0]})
    with pytest.raises(ValueError, match="outside \\[0, 120\\)"):
        converted.encoder({**inputs, "token_ids": inputs["token_ids"] + 200})
    # Called directly, the layers name them too.
    with pytest.raises(ValueError, match="perm_mask must have rank 3"):
        TwoStreamMasks()(inputs["padding_mask"], inputs["segment_ids"], reference["perm_mask"][:, 0])


def test_load_encoder_takes_an_xlnet_folder(reference):
    from bertlayers.convert import load_encoder

    encoder = load_encoder(os.path.join(FIXTURES, "xlnet_tiny"))
    assert isinstance(encoder, XLNetEncoder)
    np.testing.assert_allclose(encoder(encoder_inputs(reference))["sequence_output"], reference["content"], atol=1e-4)


def test_memory_and_clamp_len_match_transformers(reference, converted):
    inputs = encoder_inputs(reference)
    config = converted.encoder.get_config()
    weights = converted.encoder.get_weights()
    with_memory = XLNetEncoder.from_config({**config, "mem_len": 6})
    with_memory.set_weights(weights)
    batch, layers, hidden = 3, 2, 32
    first = with_memory({**inputs, "memory": np.zeros((batch, layers, 0, hidden), "float32")})
    np.testing.assert_allclose(first["sequence_output"], reference["content"], atol=1e-4)
    np.testing.assert_allclose(first["memory"], reference["memory"], atol=1e-4)
    second = with_memory({**inputs, "memory": np.asarray(first["memory"])})
    np.testing.assert_allclose(second["sequence_output"], reference["second_content"], atol=1e-4)
    np.testing.assert_allclose(second["memory"], reference["second_memory"], atol=1e-4)

    clamped = XLNetEncoder.from_config({**config, "clamp_len": 3})
    clamped.set_weights(weights)
    np.testing.assert_allclose(clamped(inputs)["sequence_output"], reference["clamped_content"], atol=1e-4)


def test_no_gradient_flows_into_the_memory(converted):
    encoder = XLNetEncoder.from_config({**converted.encoder.get_config(), "mem_len": 4})
    memory = tf.random.normal((1, 2, 4, 32))
    inputs = {
        "token_ids": tf.constant([[7, 8, 9]]),
        "segment_ids": tf.zeros((1, 3), tf.int32),
        "padding_mask": tf.ones((1, 3), tf.int32),
    }
    with tf.GradientTape() as tape:
        tape.watch(memory)
        outputs = encoder({**inputs, "memory": memory})
        total = tf.reduce_sum(outputs["memory"])
    assert tape.gradient(total, memory) is None


def test_relative_shift_equals_a_direct_computation():
    rng = np.random.default_rng(0)
    for memory in (0, 3):
        length = 5
        keys = memory + length
        scores = rng.normal(size=(2, 3, length, keys + length)).astype("float32")  # distances K..-S+1
        shifted = np.asarray(relative_shift(scores, keys))
        direct = np.zeros((2, 3, length, keys), "float32")
        for i in range(length):
            for j in range(keys):
                distance = (memory + i) - j  # query at absolute memory + i, key at j
                direct[:, :, i, j] = scores[:, :, i, keys - distance]  # column of that distance
        np.testing.assert_array_equal(shifted, direct)


def sample_masks(seed, perm_size=0, length=16):
    token_ids = np.array([[10 + i for i in range(length)]], "int32")
    token_ids[0, 7] = SEP
    token_ids[0, length - 2] = SEP
    token_ids[0, length - 1] = CLS
    padding_mask = np.ones_like(token_ids)
    rng = np.random.default_rng(seed)
    is_target = np.zeros_like(token_ids)
    is_target[0, rng.choice([p for p in range(length) if token_ids[0, p] >= 10], 6, replace=False)] = 1
    perm_mask, positions, weights = factorization_masks(
        tf.constant(token_ids),
        tf.constant(padding_mask),
        tf.constant(is_target),
        (SEP, CLS),
        tf.constant([seed, 1], tf.int64),
        perm_size or length,
        8,
    )
    return token_ids, is_target, perm_mask.numpy()[0], positions.numpy()[0], weights.numpy()[0]


def test_factorization_masks_follow_one_block_local_order():
    for seed in range(20):
        perm_size = (0, 8)[seed % 2]
        token_ids, is_target, perm_mask, positions, weights = sample_masks(seed, perm_size)
        target = is_target[0] == 1
        functional = np.isin(token_ids[0], (SEP, CLS))
        ordered = target | functional
        length = len(target)
        # A total order over the ordered tokens: i sees exactly those before it (and itself
        # unless it is a target), so each one's rank is how many others it sees.
        sees = perm_mask == 0
        rank = np.array([sees[i, ordered & (np.arange(length) != i)].sum() for i in range(length)])
        assert sorted(rank[ordered]) == list(range(ordered.sum()))
        for i in range(length):
            for j in range(length):
                if not ordered[j]:
                    expected = True  # context tokens are seen by all
                elif not ordered[i]:
                    expected = False  # and see none of the ordered ones
                elif i == j:
                    expected = not target[i]  # a target may not see itself
                else:
                    expected = rank[j] < rank[i]
                assert sees[i, j] == expected, (seed, i, j)
        if perm_size:  # positions in the first block come first in the order
            first = ordered & (np.arange(length) < perm_size)
            assert rank[first].max() < rank[ordered & ~first].min()
        # Targets are listed in position order, padded to num_predict with weight 0.
        assert list(positions[weights == 1]) == list(np.flatnonzero(target))
        assert weights.sum() == target.sum() and not positions[weights == 0].any()


def test_two_streams_attend_exactly_where_the_order_allows():
    token_ids, is_target, perm_mask, _, _ = sample_masks(3)
    length = token_ids.shape[1]
    padding_mask = np.ones((1, length), "int32")
    padding_mask[0, :2] = 0  # padding is never seen
    segment_ids = np.zeros((1, length), "int32")
    content_mask, query_mask, _ = TwoStreamMasks()(padding_mask, segment_ids, perm_mask[None])
    attention = RelativeAttention(num_heads=2, head_size=4, attention_dropout=0.0)
    rng = np.random.default_rng(0)
    content = rng.normal(size=(1, length, 8)).astype("float32")
    query = rng.normal(size=(1, length, 8)).astype("float32")
    positions = rng.normal(size=(1, 2 * length, 8)).astype("float32")
    _, _, content_probabilities, query_probabilities = attention(
        content, positions, content_mask=content_mask, query=query, query_mask=query_mask, return_attention_scores=True
    )
    seen = (perm_mask == 0) & (padding_mask[0] == 1)[None, :]
    for head in range(2):
        np.testing.assert_array_equal(np.asarray(query_probabilities)[0, head] > 0, seen)
        np.testing.assert_array_equal(np.asarray(content_probabilities)[0, head] > 0, seen | np.eye(length, dtype=bool))


def test_xlnet_layout_moves_cls_to_the_end():
    ids = tf.constant([[CLS, 10, 11, SEP, 12, SEP, 0, 0]])
    segments = tf.constant([[0, 0, 0, 0, 1, 1, 0, 0]])
    mask = tf.constant([[1, 1, 1, 1, 1, 1, 0, 0]])
    values = tf.constant([[0, 1, 0, 0, 1, 0, 0, 0]])
    new_ids, new_segments, new_values = xlnet_layout(ids, segments, mask, values, CLS)
    assert new_ids.numpy().tolist() == [[10, 11, SEP, 12, SEP, CLS, 0, 0]]
    assert new_segments.numpy().tolist() == [[0, 0, 0, 1, 1, 2, 0, 0]]
    assert new_values.numpy().tolist() == [[1, 0, 0, 1, 0, 0, 0, 0]]


def test_last_token_pooling_ignores_padding_on_either_side():
    pooler = Pooler(position="last")
    sequence = np.arange(2 * 4 * 3, dtype="float32").reshape(2, 4, 3)
    padding_mask = np.array([[1, 1, 1, 0], [0, 1, 1, 1]])
    pooled = np.asarray(pooler(sequence, padding_mask))
    expected = np.tanh(
        np.stack([sequence[0, 2], sequence[1, 3]]) @ pooler.dense.kernel.numpy() + pooler.dense.bias.numpy()
    )
    np.testing.assert_allclose(pooled, expected, atol=1e-5)


@pytest.fixture(scope="module")
def xlnet_run(corpus, tmp_path_factory):
    return tiny_family_run(corpus, tmp_path_factory, "xlnet")


def test_records_hold_whole_word_ngram_targets(xlnet_run):
    corpus, output, _ = xlnet_run
    vocab = VocabularyInfo.from_file(corpus["vocabulary"])
    objective = plm_objective({"perm_size": 0})
    files = sorted(str(p) for p in (output / "data").rglob("*.tfrecord"))
    counts, in_spans = [], []
    serialized = next(iter(tf.data.TFRecordDataset(files).batch(300)))
    records = parse_records(serialized, SEQ, PREDICTIONS, objective.feature_lengths(SEQ, PREDICTIONS))
    for ids, targets in zip(records["input_ids"].numpy(), records[TARGET_FEATURE].numpy()):
        assert not targets[np.isin(ids, vocab.never_masked_ids)].any()
        counts.append(targets.sum())
        chosen = np.flatnonzero(targets)
        in_spans.append(np.mean([(p - 1 in chosen) or (p + 1 in chosen) for p in chosen]))
    assert min(counts) == max(counts) == PREDICTIONS
    assert np.mean(in_spans) > 0.4  # n-grams of whole words, not isolated tokens


def test_target_choice_is_exact_on_short_sequences():
    vocab = VocabularyInfo.from_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "##c"])
    ids = [2, 5, 6, 7, 3]
    chosen = choose_plm_targets(ids, vocab, 10, np.random.default_rng(0))
    assert chosen.tolist() == [0, 1, 1, 1, 0]  # every non-special token, no more


def test_tiny_xlnet_learns_on_real_text_and_reloads(xlnet_run):
    _, output, summary = xlnet_run
    assert summary["steps"] == 60
    assert summary["last_epoch_plm_loss"] < summary["initial_plm_loss"] - 0.5, summary
    pretrainer = keras.saving.load_model(str(output / "pretrainer.keras"), safe_mode=True)
    assert isinstance(pretrainer, XLNetPretrainer)
    assert pretrainer.lm_head.token_embedding is pretrainer.encoder.token_embedding
    encoder = keras.saving.load_model(str(output / "encoder.keras"), safe_mode=True)
    assert isinstance(encoder, XLNetEncoder) and encoder.mem_len == 0
    for saved, loaded in zip(pretrainer.encoder.weights, encoder.weights):
        np.testing.assert_array_equal(saved.numpy(), loaded.numpy())
    history = json.load(open(output / "history.json"))
    assert history[-1]["accuracy"] > history[0]["accuracy"]


def test_xlnet_encoder_fine_tunes_on_real_reviews_and_serves(xlnet_run, tmp_path):
    corpus, output, _ = xlnet_run
    model = fine_tune_export_and_serve(str(output), corpus["vocabulary"], tmp_path)
    assert isinstance(model.encoder, XLNetEncoder)
    assert model.encoder.pooler.position == "last"

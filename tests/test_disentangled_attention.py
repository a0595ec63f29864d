"""`DisentangledAttention` against transformers' DeBERTa-v2 self-attention on random weights
(`tests/fixtures/disentangled_attention.npz`, recorded by `record_disentangled_attention.py`):
DeBERTa-v3's settings (shared keys, log buckets that matter at the length) and v2's (own position
projections, no buckets, distances clipped); the bucketed distances against the paper's rule."""

import os

import keras
import numpy as np
import pytest
from keras import ops

from bertlayers.families.deberta_v2 import DisentangledAttention
from bertlayers.families.deberta_v2.disentangled_attention import relative_positions

FIXTURE = np.load(os.path.join(os.path.dirname(__file__), "fixtures", "disentangled_attention.npz"))
SETTINGS = {
    "v3": dict(share_att_key=True, position_buckets=4, max_relative_positions=8),
    "v2": dict(share_att_key=False, position_buckets=0, max_relative_positions=6),
}
HEADS, HEAD_SIZE = 2, 8


def _linear(case, name):
    """A torch `Linear`'s weight `[out, in]` and bias as an EinsumDense kernel `[in, N, D]` and bias `[N, D]`."""
    weight, bias = FIXTURE[f"{case}/{name}.weight"], FIXTURE[f"{case}/{name}.bias"]
    return [weight.T.reshape(-1, HEADS, HEAD_SIZE), bias.reshape(HEADS, HEAD_SIZE)]


@pytest.mark.parametrize("case", sorted(SETTINGS))
def test_disentangled_attention_equals_transformers(case):
    hidden, mask = FIXTURE[f"{case}/hidden"], FIXTURE[f"{case}/mask"]
    width = hidden.shape[-1]
    attention = DisentangledAttention(HEADS, HEAD_SIZE, **SETTINGS[case])
    pairs = mask[:, None, :] * mask[:, :, None]  # [B, Q, K], as the reference's mask
    attention(hidden, attention_mask=pairs, relative_embeddings=FIXTURE[f"{case}/table"])
    projections = [("query_dense", "query_proj"), ("key_dense", "key_proj"), ("value_dense", "value_proj")]
    if case == "v2":
        projections += [("position_key_dense", "pos_key_proj"), ("position_query_dense", "pos_query_proj")]
    for layer, name in projections:
        getattr(attention, layer).set_weights(_linear(case, name))
    # The reference stops before its output projection: ours is set to the identity.
    attention.output_dense.set_weights(
        [np.eye(width, dtype="float32").reshape(HEADS, HEAD_SIZE, width), np.zeros(width)]
    )
    output = ops.convert_to_numpy(attention(hidden, attention_mask=pairs, relative_embeddings=FIXTURE[f"{case}/table"]))
    np.testing.assert_allclose(output, FIXTURE[f"{case}/context"], atol=1e-5)


@pytest.mark.parametrize("case", sorted(SETTINGS))
def test_relative_positions_equal_the_references(case):
    settings = SETTINGS[case]
    found = relative_positions(12, 12, settings["position_buckets"], settings["max_relative_positions"])
    np.testing.assert_array_equal(ops.convert_to_numpy(found), FIXTURE[f"{case}/relative"])


def test_log_buckets_follow_the_rule():
    """Within buckets/2 the distance itself; beyond, ceil(log(|d| / mid) / log((max - 1) / mid) *
    (mid - 1)) + mid with the sign kept (mid = buckets / 2): at |d| = max - 1 exactly buckets - 1,
    the case where one bit of difference between the two logarithms tips the ceiling."""
    buckets, largest = 16, 64
    middle = buckets // 2
    distances = ops.convert_to_numpy(relative_positions(200, 1, buckets, largest))[:, 0]
    for distance, bucket in enumerate(distances):
        expected = (
            distance
            if distance <= middle
            else np.ceil(
                np.log(np.float32(distance / middle)) / np.log(np.float32((largest - 1) / middle)) * (middle - 1)
            )
            + middle
        )
        assert bucket == expected, (distance, bucket, expected)
    assert distances[largest - 1] == buckets - 1 and np.all(np.diff(distances) >= 0)
    backwards = ops.convert_to_numpy(relative_positions(1, 200, buckets, largest))[0]
    np.testing.assert_array_equal(backwards, -distances)  # the sign kept


def test_disentangled_attention_refuses_bad_settings_and_round_trips():
    with pytest.raises(ValueError, match="position_terms among"):
        DisentangledAttention(2, 8, max_relative_positions=8, position_terms=("c2c",))
    attention = DisentangledAttention(2, 8, max_relative_positions=8, position_buckets=4, share_att_key=False)
    with pytest.raises(ValueError, match="needs the encoder's relative_embeddings"):
        attention(np.zeros((1, 3, 16), "float32"))
    clone = DisentangledAttention.from_config(attention.get_config())
    assert clone.get_config() == attention.get_config()
    assert keras.saving.get_registered_name(DisentangledAttention) == "bertlayers>DisentangledAttention"


@pytest.mark.parametrize("share_att_key", [True, False])
def test_disentangled_attention_passes_the_shared_layer_test(share_att_key):
    from bertlayers.testing import run_layer_test

    rng = np.random.default_rng(0)
    mask = np.ones((2, 6, 6), "int32")
    mask[1, :, 4:] = 0
    table = rng.normal(size=(1, 8, 16)).astype("float32")
    settings = {"max_relative_positions": 8, "position_buckets": 4, "share_att_key": share_att_key}
    run_layer_test(
        DisentangledAttention,
        {"num_heads": 2, "key_dim": 8, **settings},
        # The table is the encoder's, one for the batch: repeated here so `fit` sees one batch size.
        {
            "query": rng.normal(size=(2, 6, 16)).astype("float32"),
            "attention_mask": mask,
            "relative_embeddings": np.repeat(table, 2, axis=0),
        },
        (2, 6, 16),
    )

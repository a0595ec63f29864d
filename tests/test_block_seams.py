"""The encoder block's seams: a plugged feed-forward network (GeGLU) and an attention layer that
is given the positions of its queries (rotary), proven on the last-rows shortcut: the rows an
encoder computes alone (a classifier's [CLS], a masked LM's positions) equal the full
computation's rows."""

import keras
import numpy as np
import pytest
from keras import ops

from bertlayers.families.bert import BertEncoder
from bertlayers.layers import GatedFeedForward, RotaryAttention, TransformerEncoderBlock
from bertlayers.testing import run_layer_test


def rotary_geglu_block(config, index, dtype):
    return TransformerEncoderBlock(
        num_heads=config.num_heads,
        intermediate_size=config.intermediate_size,
        dropout=0.0,
        attention_dropout=0.0,
        attention_layer=RotaryAttention(config.num_heads, config.hidden_size // config.num_heads, dtype=dtype),
        feed_forward_layer=GatedFeedForward(config.intermediate_size, dtype=dtype),
        dtype=dtype,
        name=f"transformer_layer_{index}",
    )


class RotaryGegluEncoder(BertEncoder):
    """BERT's embeddings; rotary attention and a GeGLU feed-forward network in every block."""

    def make_block(self, config, index, dtype):
        return rotary_geglu_block(config, index, dtype)


def inputs(batch=3, length=9):
    rng = np.random.default_rng(0)
    lengths = np.array([9, 6, 2])
    mask = (np.arange(length)[None] < lengths[:, None]).astype("int32")
    return {
        "token_ids": rng.integers(5, 90, (batch, length)).astype("int32") * mask,
        "segment_ids": np.zeros((batch, length), "int32"),
        "padding_mask": mask,
    }


def test_gated_feed_forward_through_the_shared_layer_test():
    layer, outputs = run_layer_test(
        GatedFeedForward,
        {"intermediate_size": 12, "activation": "gelu"},
        {"inputs": np.random.default_rng(0).normal(size=(5, 8)).astype("float32")},
        (5, 8),
    )
    x = np.random.default_rng(1).normal(size=(2, 8)).astype("float32")
    gate, up, out = (layer.gate_dense, layer.up_dense, layer.output_dense)
    expected = out(keras.activations.gelu(gate(x), approximate=False) * up(x))  # GeGLU by its definition
    np.testing.assert_allclose(layer(x), expected, atol=1e-6)


def test_a_block_with_both_plugs_round_trips():
    run_layer_test(
        TransformerEncoderBlock,
        {
            "num_heads": 2,
            "intermediate_size": 12,
            "attention_layer": RotaryAttention(2, 4),
            "feed_forward_layer": GatedFeedForward(12, activation="silu"),
        },
        {
            "inputs": np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32"),
            "padding_mask": np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], "int32"),
        },
        (2, 5, 8),
        call_kwargs={"training": False},
    )


def test_rows_computed_alone_equal_the_full_computation_with_rotary_attention():
    encoder = RotaryGegluEncoder(
        vocabulary_size=100,
        num_layers=2,
        hidden_size=16,
        num_heads=2,
        intermediate_size=24,
        max_sequence_length=16,
        dropout=0.0,
        attention_dropout=0.0,
    )
    block = encoder.transformer_layers[-1]
    assert block.computes_rows and isinstance(block.feed_forward_layer, GatedFeedForward)
    x = inputs()
    outputs = encoder(x)
    full = ops.convert_to_numpy(outputs["sequence_output"])
    positions = np.array([[0, 4, 8], [0, 3, 5], [1, 0, 1]], "int32")
    rows = ops.convert_to_numpy(encoder.sequence_output_at(outputs, positions, x["padding_mask"]))
    np.testing.assert_allclose(rows, np.take_along_axis(full, positions[..., None], axis=1), atol=1e-5)
    # The pooled [CLS] row comes from the last block run on row 0 alone.
    pooled = ops.convert_to_numpy(encoder.pooler(outputs["sequence_output"], x["padding_mask"]))
    np.testing.assert_allclose(outputs["pooled_output"], pooled, atol=1e-5)
    # The block hands its attention the rows' positions: rotary attention on rows 4 and 8 alone,
    # told where they sit, equals the full output there; told nothing, it would put them at 0 and 1.
    attention = block.attention_layer
    # Inputs ten times the unit scale: attention far from uniform, so where a row sits matters.
    hidden = 10 * np.random.default_rng(2).normal(size=(1, 9, 16)).astype("float32")
    rows = np.array([[4, 8]], "int32")
    full_rows = ops.convert_to_numpy(attention(hidden, hidden))[:, [4, 8]]
    told = ops.convert_to_numpy(attention(hidden[:, [4, 8]], hidden, query_positions=rows))
    untold = ops.convert_to_numpy(attention(hidden[:, [4, 8]], hidden))
    # GPUs multiply float32 in TF32 (about three digits): the tolerance is a thousandth of the scale.
    tolerance = 1e-3 * np.abs(full_rows).max()
    np.testing.assert_allclose(told, full_rows, rtol=0, atol=tolerance)
    assert np.abs(untold - full_rows).max() > 100 * tolerance


def test_an_attention_layer_without_query_positions_gets_the_full_layer_and_a_gather():
    class ContentOnly(keras.layers.Layer):  # the Keras core layer's call, without positions
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.inner = keras.layers.MultiHeadAttention(2, 8)

        def build(self, query_shape, value_shape=None):
            self.inner.build(query_shape, value_shape or query_shape)

        def call(self, query, value, attention_mask=None, return_attention_scores=False, training=None):
            return self.inner(query, value, attention_mask=attention_mask, training=training)

    block = TransformerEncoderBlock(2, 12, attention_layer=ContentOnly())
    assert not block.computes_rows
    x = np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")
    full = block(x, padding_mask=np.ones((2, 5), "int32"))
    assert full.shape == (2, 5, 16)
    with pytest.raises(ValueError, match="ContentOnly takes no query_positions"):
        block(x, output_positions=np.zeros((2, 1), "int32"))

    class ContentOnlyEncoder(BertEncoder):
        def make_block(self, config, index, dtype):
            return TransformerEncoderBlock(
                config.num_heads,
                config.intermediate_size,
                attention_layer=ContentOnly(),
                dtype=dtype,
                name=f"transformer_layer_{index}",
            )

    encoder = ContentOnlyEncoder(
        vocabulary_size=100, num_layers=1, hidden_size=16, num_heads=2, intermediate_size=24, max_sequence_length=16
    )
    outputs = encoder(inputs())
    positions = np.array([[0, 2]] * 3, "int32")
    rows = encoder.sequence_output_at(outputs, positions, inputs()["padding_mask"])  # gathered from the full layer
    np.testing.assert_allclose(
        rows, np.take_along_axis(ops.convert_to_numpy(outputs["sequence_output"]), positions[..., None], 1)
    )

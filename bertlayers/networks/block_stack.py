"""The stack: an encoder's blocks applied layer after layer over the embedded sequence.

`BlockStack` runs blocks called as `block(x, padding_mask=, use_causal_mask=,
return_attention_scores=)`, layer i applying block `block_of_layer[i]` (one block per layer, or
fewer shared across layers). An encoder whose blocks take more than a padding mask (relative
positions, two streams, memory) brings its own stack: a subclass with its own `__call__`, extra
`inputs`, the `layers` it owns besides the blocks, and `computes_rows` False.
"""

from typing import NamedTuple

import keras
from keras import ops

INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")
# Packed rows (several sequences in one row, `bertlayers.networks.packing`): `sequence_ids` says
# which sequence of its row each token belongs to (1, 2, ...; 0 at padding) instead of a padding mask.
PACKED_INPUT_NAMES = ("token_ids", "segment_ids", "sequence_ids")


class StackOutputs(NamedTuple):
    """What a stack returns: the last layer `[B, S, H]`, every layer's output (L x `[B, S, H]`),
    every layer's attention probabilities (L x `[B, N, S, S]`, when asked) and further outputs."""

    sequence_output: object
    encoder_outputs: list
    attention_scores: list
    outputs: dict


class BlockStack:
    """Blocks applied in order (a plain object: the blocks are the encoder's layers).

    Args:
      blocks: the distinct blocks.
      block_of_layer: for each layer, the index of the block it applies.
      causal: every block attends left to right.
    """

    def __init__(
        self, blocks: list[keras.layers.Layer], block_of_layer: list[int] | tuple[int, ...], causal: bool = False
    ) -> None:
        self.blocks = list(blocks)
        self.block_of_layer = tuple(block_of_layer)
        self.causal = bool(causal)

    def inputs(self):
        """The model's `keras.Input`s by name: `INPUT_NAMES`, int32 `[batch, seq]` (a stack of
        another kind adds its own)."""
        return {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}

    def layers(self):
        """{attribute name: layer} the encoder owns for this stack besides its blocks."""
        return {}

    def unused_layers(self):
        """Layers of `layers()` the encoder's own graph never calls (a pretraining-only part):
        models that do not call them leave them out of training."""
        return []

    def __call__(self, x, inputs, return_attention_scores=False):
        """The stack over the embedded sequence `x` `[B, S, H]`; `inputs` are the model's inputs
        (packed rows add an `attention_mask` keeping each sequence to itself and each token's
        `positions` in its own sequence: `bertlayers.networks.packing`)."""
        encoder_outputs, attention_scores = [], []
        packed = {key: inputs[key] for key in ("attention_mask", "positions") if key in inputs}
        for index in self.block_of_layer:
            x = self.blocks[index](
                x,
                padding_mask=inputs["padding_mask"],
                use_causal_mask=self.causal,
                return_attention_scores=return_attention_scores,
                **packed,
            )
            if return_attention_scores:
                x, scores = x
                attention_scores.append(scores)  # [B, N, S, S]
            encoder_outputs.append(x)  # [B, S, H]
        return StackOutputs(x, encoder_outputs, attention_scores, {})

    @property
    def computes_rows(self):
        """Whether the last layer can be run on chosen rows alone: its block says so
        (`TransformerEncoderBlock.computes_rows`: its attention is told the queries' positions)."""
        return type(self).__call__ is BlockStack.__call__ and bool(
            getattr(self.blocks[self.block_of_layer[-1]], "computes_rows", False)
        )

    def rows_at(self, last_input, padding_mask, positions):
        """The last layer's output `[B, P, H]` at `positions` `[B, P]` only, run on that layer's
        input `last_input` `[B, S, H]` (keys and values still span the sequence)."""
        return self.blocks[self.block_of_layer[-1]](
            last_input, padding_mask=padding_mask, use_causal_mask=self.causal, output_positions=positions
        )


def first_positions(padding_mask):
    """Position 0 of every row, `[B, 1]` int."""
    return ops.zeros_like(padding_mask[:, :1])

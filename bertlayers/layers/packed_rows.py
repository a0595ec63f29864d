"""What a packed row's `sequence_ids` give the encoder: its padding mask, the block-diagonal
attention mask keeping each sequence to itself, and each token's position in its own sequence."""

import keras
from keras import ops

from bertlayers.layers.input_checks import check_integer_ids, check_rank


@keras.saving.register_keras_serializable(package="bertlayers")
class PackedRows(keras.layers.Layer):
    """Several sequences in one row (unpadded execution): their tokens are computed side by side,
    none attends across a sequence's edge, and positions restart at each sequence's start.

    Call args:
      sequence_ids: int `[batch, seq]`: 1, 2, ... for the sequences of a row (each contiguous),
        0 at padding.

    Returns:
      A dict: `padding_mask` int32 `[batch, seq]` (1 at every token), `attention_mask` bool
      `[batch, seq, seq]` (same sequence), `positions` int32 `[batch, seq]`.
    """

    def build(self, sequence_ids_shape):
        self.built = True

    def call(self, sequence_ids):
        check_integer_ids(sequence_ids, "sequence_ids")
        check_rank(sequence_ids, 2, "sequence_ids", "[batch, seq]")
        real = ops.not_equal(sequence_ids, 0)  # [batch, seq]
        same = ops.equal(sequence_ids[:, :, None], sequence_ids[:, None, :])  # [batch, seq, seq]
        # A token's position: its index less its sequence's first token's (sequences contiguous).
        index = ops.cumsum(ops.ones_like(sequence_ids), axis=1) - 1  # [batch, seq]
        first = ops.min(ops.where(same, index[:, None, :], ops.shape(sequence_ids)[1]), axis=-1)
        return {
            "padding_mask": ops.cast(real, "int32"),
            "attention_mask": ops.logical_and(same, real[:, None, :]),  # block-diagonal
            "positions": ops.cast(index - first, "int32"),
        }

    def compute_output_spec(self, sequence_ids):
        batch, length = sequence_ids.shape
        return {
            "padding_mask": keras.KerasTensor((batch, length), "int32"),
            "attention_mask": keras.KerasTensor((batch, length, length), "bool"),
            "positions": keras.KerasTensor((batch, length), "int32"),
        }

"""A bidirectional LSTM over a padded sequence: ELMo's task network over frozen features."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bertlayers")
class BidirectionalLSTM(keras.layers.Layer):
    """h_t = [LSTM→(x_1..x_t); LSTM←(x_t..x_n)] over the real tokens only.

    Padding never enters either direction's state: the backward LSTM starts at each example's
    last real token, so the final state does not depend on how far the batch is padded.

    Args:
      units: width of each direction (the output is `2 * units` wide).
      return_sequences: one vector per token (tagging) or one per example, the two
        directions' final states concatenated (classification).
      dropout: dropout on the input features (ELMo applies it to the mixed representation).

    Call args:
      sequence: `[batch, seq, H]`.
      padding_mask: `[batch, seq]`, 1 at real tokens.

    Returns:
      `[batch, seq, 2 * units]` or `[batch, 2 * units]`.
    """

    def __init__(self, units: int, return_sequences: bool = True, dropout: float = 0.0, **kwargs) -> None:
        super().__init__(**kwargs)
        if int(units) <= 0:
            raise ValueError(f"units must be > 0, got {units}.")
        self.units = int(units)
        self.return_sequences = bool(return_sequences)
        self.dropout = float(dropout)

    def build(self, sequence_shape, padding_mask_shape=None):
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.recurrent = keras.layers.Bidirectional(
            keras.layers.LSTM(self.units, return_sequences=self.return_sequences, dtype=self.dtype_policy),
            dtype=self.dtype_policy,
            name="bidirectional",
        )
        self.recurrent.build(sequence_shape)
        self.built = True

    def call(self, sequence, padding_mask, training=None):
        x = self.dropout_layer(sequence, training=training)  # [B, S, H]
        mask = ops.cast(padding_mask, "bool")  # [B, S]
        outputs = self.recurrent(x, mask=mask, training=training)  # [B, S, 2U] or [B, 2U]
        if self.return_sequences:
            # Zeros at padding (the LSTM repeats its last state there); the product is also a
            # tensor without a Keras mask, which the heads do not take.
            outputs = outputs * ops.expand_dims(ops.cast(mask, outputs.dtype), -1)
        return outputs

    def compute_output_shape(self, sequence_shape, padding_mask_shape=None):
        if self.return_sequences:
            return tuple(sequence_shape[:-1]) + (2 * self.units,)
        return (sequence_shape[0], 2 * self.units)

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units, "return_sequences": self.return_sequences, "dropout": self.dropout})
        return config

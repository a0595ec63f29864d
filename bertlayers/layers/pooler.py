"""The pooler: one token's state through a dense layer (tanh in BERT), the sequence's summary."""

import keras
from keras import ops

from bertlayers.layers.activations import canonical_activation, get_activation
from bertlayers.layers.initializers import bert_initializer

POOLING_POSITIONS = ("first", "last")


@keras.saving.register_keras_serializable(package="bertlayers")
class Pooler(keras.layers.Layer):
    """pooled = act(W · sequence[:, t] + b)

    BERT summarizes at its first token ([CLS]); XLNet at its last (its [CLS] ends the
    sequence, and its attention lets the last token see everything before it).

    Args:
      kernel_initializer: initializer of `W` `[H, H]`.
      position: "first" (t = 0) or "last" (t = the last real token of each row, read from
        `padding_mask`, so padding on either side does not move it).
      activation: "tanh" (BERT, ALBERT, RoBERTa's classifier, XLNet's summary); DistilBERT's
        classifier reads through "relu", ELECTRA's through "gelu".

    Call args:
      sequence: `[batch, seq, H]`.
      padding_mask: `[batch, seq]`, nonzero at real tokens (used by "last"; without it the
        last position is taken).

    Returns:
      `[batch, H]`.
    """

    def __init__(
        self,
        kernel_initializer: str | keras.initializers.Initializer | None = None,
        position: str = "first",
        activation: str = "tanh",
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.activation = canonical_activation(activation)
        self._activation_fn = get_activation(self.activation)
        if position not in POOLING_POSITIONS:
            raise ValueError(f"Pooler position must be one of {POOLING_POSITIONS}, got {position!r}.")
        self.kernel_initializer = keras.initializers.get(kernel_initializer or bert_initializer())
        self.position = position

    def build(self, sequence_shape, padding_mask_shape=None):
        self.dense = keras.layers.Dense(
            sequence_shape[-1],
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="dense",
        )
        self.dense.build((sequence_shape[0], sequence_shape[-1]))
        self.built = True

    def call(self, sequence, padding_mask=None):
        if self.position == "first":
            return self._activation_fn(self.dense(sequence[:, 0, :]))
        if padding_mask is None:
            return self._activation_fn(self.dense(sequence[:, -1, :]))
        # The highest real position: right for right padding and for XLNet's left padding alike.
        positions = ops.arange(ops.shape(padding_mask)[1], dtype="int32")[None, :]
        last = ops.max(positions * ops.cast(ops.not_equal(padding_mask, 0), "int32"), axis=1)  # [batch]
        picked = ops.take_along_axis(sequence, last[:, None, None], axis=1)[:, 0, :]  # [batch, H]
        return self._activation_fn(self.dense(picked))

    def compute_output_shape(self, sequence_shape, padding_mask_shape=None):
        return (sequence_shape[0], sequence_shape[-1])

    def get_config(self):
        config = super().get_config()
        config["kernel_initializer"] = keras.initializers.serialize(self.kernel_initializer)
        config["position"] = self.position
        config["activation"] = self.activation
        return config

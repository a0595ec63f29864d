"""The pooler: one token's state (or the mean of the real tokens') through a dense layer (tanh in
BERT), the sequence's summary."""

import keras
from keras import ops

from bertlayers import backend
from bertlayers.layers.activations import canonical_activation, get_activation
from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.registered import registered_class, registered_name

POOLING_POSITIONS = ("first", "last", "mean", "late")


@keras.saving.register_keras_serializable(package="bertlayers")
class Pooler(keras.layers.Layer):
    """pooled = act(W · sequence[:, t] + b)   (then Norm(pooled), where a `normalization` is given)

    BERT summarizes at its first token ([CLS]); XLNet at its last (its [CLS] ends the
    sequence, and its attention lets the last token see everything before it); ModernBERT at
    the first token or over the mean of the real tokens, then normalizes (its classifier's
    `head`: dense → act → norm).

    Args:
      kernel_initializer: initializer of `W` `[H, H]`.
      position: "first" (t = 0) or "last" (t = the last real token of each row, read from
        `padding_mask`, so padding on either side does not move it).
      activation: "tanh" (BERT, ALBERT, RoBERTa's classifier, XLNet's summary); DistilBERT's
        classifier reads through "relu", ELECTRA's through "gelu".
      use_bias: the dense layer's bias (`b`; ModernBERT's `classifier_bias`).
      normalization: a norm after the activation (its class or registered name), None for none.
      layer_norm_epsilon: that norm's epsilon.

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
        use_bias: bool = True,
        normalization: str | type | None = None,
        layer_norm_epsilon: float = 1e-12,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.activation = canonical_activation(activation)
        self._activation_fn = get_activation(self.activation)
        if position not in POOLING_POSITIONS:
            raise ValueError(f"Pooler position must be one of {POOLING_POSITIONS}, got {position!r}.")
        self.kernel_initializer = keras.initializers.get(kernel_initializer or bert_initializer())
        self.position = position
        self.use_bias = bool(use_bias)
        self._normalization = registered_class(normalization, "normalization") if normalization is not None else None
        self.layer_norm_epsilon = float(layer_norm_epsilon)

    def build(self, sequence_shape, padding_mask_shape=None):
        self.dense = keras.layers.Dense(
            sequence_shape[-1],
            use_bias=self.use_bias,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="dense",
        )
        self.dense.build((sequence_shape[0], sequence_shape[-1]))
        self.norm = None
        if self._normalization is not None:
            self.norm = self._normalization(epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="norm")
            self.norm.build((sequence_shape[0], sequence_shape[-1]))
        self.built = True

    def call(self, sequence, padding_mask=None):
        return self._pooled(sequence, lambda x: self._summary(x, padding_mask))  # [batch, H]

    def per_sequence(self, sequence, sequence_ids, max_sequences):
        """The summary of each sequence of packed rows, `[batch, max_sequences, H]`, as `call`
        gives it for that sequence alone (zeros where a row holds fewer sequences).

        Args:
          sequence: `[batch, seq, H]`.
          sequence_ids: int `[batch, seq]`, 1, 2, ... per packed sequence (contiguous), 0 at padding.
          max_sequences: K, the most sequences a row holds.
        """
        member = ops.one_hot(ops.cast(sequence_ids, "int32") - 1, max_sequences)  # [batch, seq, K]; padding: none
        pooled = self._pooled(sequence, lambda x: self._sequence_summaries(x, member))  # [batch, K, H]
        present = ops.max(member, axis=1) > 0  # [batch, K]
        return pooled * ops.expand_dims(ops.cast(present, pooled.dtype), -1)

    def _pooled(self, sequence, summarize):
        """Norm(act(W · summary)): the summary of the sequence, or ("late") of each token's act(W · x)."""
        if self.position == "late":
            pooled = summarize(self._activation_fn(self.dense(sequence)))
        else:
            pooled = self._activation_fn(self.dense(summarize(sequence)))
        return pooled if self.norm is None else self.norm(pooled)

    def _summary(self, sequence, padding_mask):
        """`[batch, H]` of `sequence` `[batch, seq, H]` at the pooler's position."""
        if self.position == "first":
            return sequence[:, 0, :]
        if self.position in ("mean", "late"):
            return _mean(sequence, padding_mask)
        if padding_mask is None:
            return sequence[:, -1, :]
        real = ops.not_equal(padding_mask, 0)  # [batch, seq]
        # The highest real position: right for right padding and for XLNet's left padding alike.
        positions = ops.arange(ops.shape(padding_mask)[1], dtype="int32")[None, :]
        last = ops.max(positions * ops.cast(real, "int32"), axis=1)  # [batch]
        return backend.rows_at(sequence, last[:, None])[:, 0, :]  # [batch, H]

    def _sequence_summaries(self, sequence, member):
        """`[batch, K, H]`: each packed sequence's summary (`member` `[batch, seq, K]`, one-hot)."""
        if self.position in ("mean", "late"):
            total = ops.einsum("bsk,bsh->bkh", member, ops.cast(sequence, "float32"))
            return ops.cast(total / ops.expand_dims(ops.maximum(ops.sum(member, axis=1), 1.0), -1), sequence.dtype)
        index = ops.cast(ops.arange(ops.shape(member)[1]), "float32")[None, :, None]  # [1, seq, 1]
        if self.position == "first":
            at = ops.argmin(ops.where(member > 0, index, float(2**30)), axis=1)  # [batch, K]
        else:
            at = ops.argmax(ops.where(member > 0, index, -1.0), axis=1)
        return backend.rows_at(sequence, ops.cast(at, "int32"))  # [batch, K, H]

    def compute_output_shape(self, sequence_shape, padding_mask_shape=None):
        return (sequence_shape[0], sequence_shape[-1])

    def get_config(self):
        config = super().get_config()
        config["kernel_initializer"] = keras.initializers.serialize(self.kernel_initializer)
        config["position"] = self.position
        config["activation"] = self.activation
        config["use_bias"] = self.use_bias
        config["normalization"] = registered_name(self._normalization) if self._normalization else None
        config["layer_norm_epsilon"] = self.layer_norm_epsilon
        return config


def _mean(sequence, padding_mask):
    """The mean of `sequence` `[batch, seq, H]` over the real tokens (all without a mask), in float32."""
    values = ops.cast(sequence, "float32")
    if padding_mask is None:
        return ops.cast(ops.mean(values, axis=1), sequence.dtype)
    weights = ops.expand_dims(ops.cast(ops.not_equal(padding_mask, 0), "float32"), -1)  # [batch, seq, 1]
    total = ops.sum(values * weights, axis=1)  # [batch, H]
    return ops.cast(total / ops.maximum(ops.sum(weights, axis=1), 1.0), sequence.dtype)

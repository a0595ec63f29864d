"""SPLADE's pooling: a masked language model's logits at every token turned into one sparse
vector over the vocabulary (Formal et al., 2021 and 2022; sentence-transformers' `SpladePooling`)."""

import keras
from keras import ops

from bertlayers.backend import TensorLike

SPLADE_POOLING = ("max", "sum")
SPLADE_ACTIVATIONS = ("relu", "log1p_relu")


@keras.saving.register_keras_serializable(package="bertlayers")
class SpladePooling(keras.layers.Layer):
    """weights[b, v] = pool over the real tokens t of log(1 + ReLU(logits[b, t, v])); no weights.

    "max" is SPLADE v2 and later's pooling, "sum" the first SPLADE's; activation "log1p_relu"
    takes log(1 + .) once more (OpenSearch's models). Padding contributes 0, which no real token's
    weight is below, so it changes neither pooling.

    Args:
      pooling: "max" or "sum" over the tokens.
      activation: "relu" or "log1p_relu".

    Call args:
      logits: `[batch, seq, vocabulary]` masked-LM logits at every token.
      padding_mask: `[batch, seq]`, nonzero at real tokens (None: every token is real).

    Returns:
      float32 `[batch, vocabulary]`, nonnegative; zero where no token votes for the entry.
    """

    def __init__(self, pooling: str = "max", activation: str = "relu", **kwargs) -> None:
        super().__init__(**kwargs)
        if pooling not in SPLADE_POOLING:
            raise ValueError(f"SpladePooling pooling must be one of {SPLADE_POOLING}, got {pooling!r}.")
        if activation not in SPLADE_ACTIVATIONS:
            raise ValueError(f"SpladePooling activation must be one of {SPLADE_ACTIVATIONS}, got {activation!r}.")
        self.pooling = pooling
        self.activation = activation

    def build(self, logits_shape, padding_mask_shape=None):
        self.built = True

    def call(self, logits, padding_mask=None):
        weights = ops.log1p(ops.relu(ops.cast(logits, "float32")))  # [batch, seq, V]
        if self.activation == "log1p_relu":
            weights = ops.log1p(weights)
        if padding_mask is not None:
            weights = weights * ops.expand_dims(ops.cast(ops.not_equal(padding_mask, 0), "float32"), -1)
        pooled = ops.max(weights, axis=1) if self.pooling == "max" else ops.sum(weights, axis=1)
        return ops.cast(pooled, self.compute_dtype)  # [batch, V]

    def compute_output_shape(self, logits_shape, padding_mask_shape=None):
        return (logits_shape[0], logits_shape[-1])

    def get_config(self):
        return {**super().get_config(), "pooling": self.pooling, "activation": self.activation}


def flops_regularizer(weights: TensorLike) -> TensorLike:
    """The FLOPS regularizer of a batch of sparse vectors `[batch, vocabulary]` (Paria et al.,
    2020; SPLADE's): Σ_v (mean_b weights[b, v])², the expected number of multiplications a
    sparse dot product of two such vectors costs, made differentiable."""
    return ops.sum(ops.square(ops.mean(ops.cast(weights, "float32"), axis=0)))

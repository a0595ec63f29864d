"""Gemma's own layers: its RMSNorm (scaled by 1 + weight) and its embedding scaled by sqrt(H)."""

import math

import keras
from keras import ops

from bertlayers.layers.token_embedding import TokenEmbedding
from bertlayers.networks.block_parts import register_normalization


@keras.saving.register_keras_serializable(package="bertlayers")
class GemmaRMSNorm(keras.layers.Layer):
    """y = x / sqrt(mean(x²) + ε) · (1 + w), in float32 and cast back (Gemma's `Gemma3RMSNorm`: its
    weight starts at 0 and is stored as the offset from 1, so the checkpoint's tensor loads as it is).

    Args:
      epsilon: ε.
      axis: the axis normalized (the last).
    """

    def __init__(self, epsilon: float = 1e-6, axis: int = -1, **kwargs) -> None:
        super().__init__(**kwargs)
        self.epsilon = float(epsilon)
        self.axis = int(axis)

    def build(self, input_shape):
        self.scale = self.add_weight(name="scale", shape=(input_shape[self.axis],), initializer="zeros")
        self.built = True

    def call(self, x):
        values = ops.cast(x, "float32")
        normalized = values * ops.rsqrt(ops.mean(ops.square(values), axis=self.axis, keepdims=True) + self.epsilon)
        return ops.cast(normalized * (1.0 + ops.cast(self.scale, "float32")), self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon, "axis": self.axis}


@keras.saving.register_keras_serializable(package="bertlayers")
class ScaledTokenEmbedding(TokenEmbedding):
    """`TokenEmbedding` whose vectors are multiplied by sqrt(H) (Gemma's
    `Gemma3TextScaledWordEmbedding`: the scale in the compute dtype, so 55.5 for H = 3,072 in
    bfloat16, as transformers casts it)."""

    def call(self, token_ids, segment_ids=None, training=None, positions=None):
        embedded = super().call(token_ids, segment_ids=segment_ids, training=training, positions=positions)
        return embedded * ops.cast(math.sqrt(self.embedding_size), embedded.dtype)


register_normalization("gemma_rms_norm", GemmaRMSNorm)

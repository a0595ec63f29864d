"""ELMo-style scalar mix of all encoder layers, for feature-based use."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bertlayers")
class ScalarMix(keras.layers.Layer):
    """mix = γ · Σ_j softmax(s)_j · h_j   (ELMo, Peters et al. 2018, eq. 1)

    `s` (one weight per layer, initially equal) and `γ` (initially 1) are learned. With
    `layer_norm`, each h_j is first normalized over its features (mean 0, variance 1 per token,
    no learned scale): ELMo's section 3.2, for layers whose activations differ in scale.

    Args:
      layer_norm: normalize each layer before mixing.

    Call args:
      layers: a list of L tensors, each `[batch, seq, H]`.

    Returns:
      `[batch, seq, H]`.
    """

    def __init__(self, layer_norm: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.layer_norm = bool(layer_norm)

    def build(self, layers_shape):
        if not isinstance(layers_shape, (list, tuple)) or not layers_shape:
            raise ValueError("ScalarMix takes a non-empty list of layer outputs.")
        self.num_layers = len(layers_shape)
        self.layer_weights = self.add_weight(name="layer_weights", shape=(self.num_layers,), initializer="zeros")
        self.gamma = self.add_weight(name="gamma", shape=(), initializer="ones")
        self.built = True

    def call(self, layers):
        if len(layers) != self.num_layers:
            raise ValueError(f"ScalarMix was built for {self.num_layers} layers, got {len(layers)}.")
        weights = ops.cast(ops.softmax(self.layer_weights), self.compute_dtype)
        if self.layer_norm:
            layers = [_normalized(h) for h in layers]
        stacked = ops.stack(layers, axis=0)
        mixed = ops.tensordot(weights, stacked, axes=1)
        return ops.cast(self.gamma, self.compute_dtype) * mixed

    def compute_output_shape(self, layers_shape):
        return layers_shape[0]

    def get_config(self):
        return {**super().get_config(), "layer_norm": self.layer_norm}


def _normalized(h, epsilon=1e-6):
    """`h` `[..., H]` with mean 0 and variance 1 over its last axis (statistics in float32)."""
    x = ops.cast(h, "float32")
    mean = ops.mean(x, axis=-1, keepdims=True)
    variance = ops.mean(ops.square(x - mean), axis=-1, keepdims=True)
    return ops.cast((x - mean) * ops.rsqrt(variance + epsilon), h.dtype)

"""Highway layers (Srivastava et al. 2015), as ELMo's character encoder stacks them."""

from collections.abc import Callable

import keras
from keras import ops

from bertlayers.layers.initializers import clone_initializer


@keras.saving.register_keras_serializable(package="bertlayers")
class Highway(keras.layers.Layer):
    """x ← g ⊙ x + (1 − g) ⊙ f(W_f x + b_f),   g = sigmoid(W_g x + b_g),   per layer.

    The gate g carries the input through; its bias starts at 1 so that each layer at first
    mostly carries (allennlp's `Highway`, which ELMo's weights were trained with). Width is kept.

    Args:
      num_layers: how many highway layers, applied in turn.
      activation: f (ELMo: relu).
      kernel_initializer: of both projections.

    Call args:
      inputs: `[..., D]`.

    Returns:
      `[..., D]`.
    """

    def __init__(
        self,
        num_layers: int = 1,
        activation: str | Callable = "relu",
        kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if int(num_layers) < 1:
            raise ValueError(f"Highway: num_layers must be at least 1, got {num_layers}.")
        self.num_layers = int(num_layers)
        self.activation = keras.activations.get(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, inputs_shape):
        width = inputs_shape[-1]
        self.projections = []
        for index in range(self.num_layers):
            # One [D, 2D] product per layer: the transform's half, then the gate's.
            dense = keras.layers.Dense(
                2 * width,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                bias_initializer=keras.initializers.Constant([0.0] * width + [1.0] * width),
                dtype=self.dtype_policy,
                name=f"layer_{index}",
            )
            dense.build(inputs_shape)
            self.projections.append(dense)
        self.built = True

    def call(self, inputs):
        x = inputs  # [..., D]
        for dense in self.projections:
            transform, gate = ops.split(dense(x), 2, axis=-1)  # [..., D] each
            gate = ops.sigmoid(gate)
            x = gate * x + (1.0 - gate) * self.activation(transform)  # [..., D]
        return x

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        return {
            **super().get_config(),
            "num_layers": self.num_layers,
            "activation": keras.activations.serialize(self.activation),
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }

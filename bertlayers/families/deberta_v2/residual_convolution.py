"""A convolution over the tokens added to a layer's output (DeBERTa-v2's `ConvLayer` after its
first layer): local n-gram features beside attention's global ones."""

import keras
from keras import ops

from bertlayers.layers.activations import canonical_activation, get_activation
from bertlayers.layers.initializers import bert_initializer


@keras.saving.register_keras_serializable(package="bertlayers")
class ResidualConvolution(keras.layers.Layer):
    """y = LN(residual + act(Dropout(Conv1d(x)))) at real tokens, 0 at padding.

    The convolution reads `x` (the stack's input, zero at padding) with "same" padding along
    the sequence; its outputs at padding are zeroed before the activation, as the reference does.

    Args:
      kernel_size: the convolution's width, odd (centred on each token).
      groups: grouped convolution (the channels split into that many groups).
      activation: after the convolution ("tanh" in DeBERTa-v2).
      dropout: on the convolution's output.
      layer_norm_epsilon: the LayerNorm's epsilon.
      kernel_initializer: the convolution kernel's initializer.

    Call args:
      inputs: `[batch, seq, H]`, what the convolution reads.
      residual: `[batch, seq, H]`, what its output is added to.
      padding_mask: `[batch, seq]`, nonzero at real tokens (None: all real).

    Returns:
      `[batch, seq, H]`.
    """

    def __init__(
        self,
        kernel_size: int,
        groups: int = 1,
        activation: str = "tanh",
        dropout: float = 0.0,
        layer_norm_epsilon: float = 1e-7,
        kernel_initializer: str | keras.initializers.Initializer | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.kernel_size = int(kernel_size)
        self.groups = int(groups)
        self.activation = canonical_activation(activation)
        self.dropout = float(dropout)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.kernel_initializer = keras.initializers.get(kernel_initializer or bert_initializer())
        if self.kernel_size < 1 or self.kernel_size % 2 == 0:
            raise ValueError(
                f"ResidualConvolution takes an odd kernel_size (centred on each token), got {kernel_size}."
            )
        self._activation_fn = get_activation(self.activation)

    def build(self, inputs_shape, residual_shape=None, padding_mask_shape=None):
        hidden = inputs_shape[-1]
        if hidden % self.groups:
            raise ValueError(f"ResidualConvolution: groups ({self.groups}) must divide the width ({hidden}).")
        self.convolution = keras.layers.Conv1D(
            hidden,
            self.kernel_size,
            padding="same",
            groups=self.groups,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="convolution",
        )
        self.convolution.build(inputs_shape)
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm"
        )
        self.layer_norm.build(inputs_shape)
        self.built = True

    def call(self, inputs, residual, padding_mask=None, training=None):
        real = None
        if padding_mask is not None:
            real = ops.expand_dims(ops.cast(ops.not_equal(padding_mask, 0), self.compute_dtype), -1)  # [B, S, 1]
        x = self.convolution(inputs)  # [B, S, H]
        if real is not None:
            x = x * real
        x = self._activation_fn(self.dropout_layer(x, training=training))
        x = self.layer_norm(residual + x)
        return x if real is None else x * real

    def compute_output_shape(self, inputs_shape, residual_shape=None, padding_mask_shape=None):
        return tuple(inputs_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "kernel_size": self.kernel_size,
                "groups": self.groups,
                "activation": self.activation,
                "dropout": self.dropout,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config

"""The gated feed-forward network (GLU family: GeGLU, SwiGLU), a plug for the encoder block.

Shazeer (2020), "GLU Variants Improve Transformer": the inner layer is the product of an
activated projection and a linear one, y = W_out · (act(W_gate · x) ⊙ (W_up · x)). ModernBERT
(GeGLU) and NeoBERT (SwiGLU) use it in place of BERT's W2 · act(W1 · x).
"""

import keras

from bertlayers.layers.activations import activate, canonical_activation, get_activation
from bertlayers.layers.initializers import bert_initializer, clone_initializer


@keras.saving.register_keras_serializable(package="bertlayers")
class GatedFeedForward(keras.layers.Layer):
    """`W_out · (act(W_gate · x) ⊙ (W_up · x))`, position-wise.

    Plugged into `TransformerEncoderBlock(feed_forward_layer=...)`, it replaces the block's two
    dense layers; the block keeps its dropout, residual and LayerNorms around it, and runs it on
    the real tokens' rows only.

    Args:
      intermediate_size: width `I` of the gated inner layer.
      activation: the gate's activation: "gelu" for GeGLU, "silu" for SwiGLU.
      use_bias: biases on the three projections (ModernBERT has none).
      output_bias: the output projection's bias where it differs from the others' (GTE: the
        gate and up projections have none, the down projection has one); None: `use_bias`.
      kernel_initializer: initializer of every kernel.

    Call args:
      inputs: `[..., hidden]` (the block passes token rows `[tokens, H]`).

    Returns:
      `[..., hidden]`.
    """

    def __init__(
        self,
        intermediate_size: int,
        activation: str = "gelu",
        use_bias: bool = True,
        kernel_initializer: str | keras.initializers.Initializer | None = None,
        output_bias: bool | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.intermediate_size = int(intermediate_size)
        self.activation = canonical_activation(activation)
        self.use_bias = bool(use_bias)
        self.output_bias = self.use_bias if output_bias is None else bool(output_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer or bert_initializer())
        self._activation_fn = get_activation(self.activation)

    def _dense(self, units, name, use_bias=None):
        return keras.layers.Dense(
            units,
            use_bias=self.use_bias if use_bias is None else use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def build(self, inputs_shape):
        hidden_size = inputs_shape[-1]
        inner_shape = tuple(inputs_shape[:-1]) + (self.intermediate_size,)
        self.gate_dense = self._dense(self.intermediate_size, "gate")
        self.gate_dense.build(inputs_shape)
        self.up_dense = self._dense(self.intermediate_size, "up")
        self.up_dense.build(inputs_shape)
        self.output_dense = self._dense(hidden_size, "output", use_bias=self.output_bias)
        self.output_dense.build(inner_shape)
        self.built = True

    def call(self, inputs, training=None):
        gated = activate(self._activation_fn, self.gate_dense(inputs), training) * self.up_dense(inputs)  # [..., I]
        return self.output_dense(gated)  # [..., H]

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        return {
            **super().get_config(),
            "intermediate_size": self.intermediate_size,
            "activation": self.activation,
            "use_bias": self.use_bias,
            "output_bias": self.output_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }

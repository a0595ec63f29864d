"""A mixture-of-experts feed-forward network (Shazeer et al., 2017; Switch Transformer, Fedus et
al., 2021; nomic-embed-text-v2's MoE layers), a `feed_forward_layer` for the encoder block.

Dimensions: T tokens (any leading axes), H hidden, E experts, I an expert's inner width, k experts
a token.

    p        = softmax(x W_router)                          [T, E], the router's probabilities
    top      = the k experts of largest p a token
    w        = p[top], divided by their sum (normalize_weights), else as they are
    y        = Σ_{e in top} w_e · expert_e(x)  (+ shared(x))   expert_e(x) = W2_e act(W1_e x + b1_e) + b2_e
    aux loss = aux_loss_weight · E · Σ_e f_e · P_e          (Switch's load balancing, in training)
               f_e: the share of the T·k assignments that go to e; P_e: the mean of p[:, e]

Every expert runs on every token and the unselected are weighted 0 (dense dispatch: exact and
shape-static, so it compiles under XLA and TF graphs alike; a capacity-bounded scatter is the
lever where E is large). The auxiliary loss is added with `add_loss`, so `fit` trains the router
to spread the tokens.
"""

import keras
from keras import ops

from bertlayers.backend import TensorLike
from bertlayers.layers.activations import get_activation
from bertlayers.layers.initializers import clone_initializer


@keras.saving.register_keras_serializable(package="bertlayers")
class MixtureOfExperts(keras.layers.Layer):
    """Top-k routed experts (and an optional shared expert) in place of the block's feed-forward.

    Args:
      num_experts: E, the experts.
      intermediate_size: I, each expert's inner width.
      experts_per_token: k, the experts each token is sent to.
      activation: the experts' activation.
      shared_intermediate_size: the inner width of an expert every token also goes through,
        unweighted (None: none).
      normalize_weights: divide the k chosen probabilities by their sum (Mixtral, nomic's MoE);
        False keeps them as the softmax gave them (Switch).
      aux_loss_weight: the load-balancing loss's weight (0: none).
      use_bias: biases on the experts' projections.
      kernel_initializer: the experts' and the router's kernel initializer.

    Call args:
      inputs: `[..., H]`.
      training: whether to add the load-balancing loss.

    Returns:
      `[..., H]`.
    """

    def __init__(
        self,
        num_experts: int,
        intermediate_size: int,
        experts_per_token: int = 2,
        activation: str = "gelu",
        shared_intermediate_size: int | None = None,
        normalize_weights: bool = True,
        aux_loss_weight: float = 0.01,
        use_bias: bool = True,
        kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if int(num_experts) < 1 or not 1 <= int(experts_per_token) <= int(num_experts):
            raise ValueError(
                f"MixtureOfExperts needs 1 <= experts_per_token <= num_experts; got {experts_per_token} of "
                f"{num_experts}."
            )
        self.num_experts = int(num_experts)
        self.intermediate_size = int(intermediate_size)
        self.experts_per_token = int(experts_per_token)
        self.activation = activation
        self.shared_intermediate_size = None if shared_intermediate_size is None else int(shared_intermediate_size)
        self.normalize_weights = bool(normalize_weights)
        self.aux_loss_weight = float(aux_loss_weight)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self._activation = get_activation(activation)

    def build(self, inputs_shape):
        hidden, experts, inner = inputs_shape[-1], self.num_experts, self.intermediate_size

        def kernel(name, shape):
            return self.add_weight(
                name=name,
                shape=shape,
                initializer=clone_initializer(self.kernel_initializer),
                dtype=self.variable_dtype,
            )

        def bias(name, shape):
            return self.add_weight(name=name, shape=shape, initializer="zeros", dtype=self.variable_dtype)

        self.router = kernel("router", (hidden, experts))
        self.inner_kernel = kernel("inner_kernel", (experts, hidden, inner))
        self.outer_kernel = kernel("outer_kernel", (experts, inner, hidden))
        if self.use_bias:
            self.inner_bias, self.outer_bias = (
                bias("inner_bias", (experts, inner)),
                bias("outer_bias", (experts, hidden)),
            )
        self.shared = None
        if self.shared_intermediate_size:
            self.shared = [
                keras.layers.Dense(
                    self.shared_intermediate_size,
                    activation=self._activation,
                    use_bias=self.use_bias,
                    kernel_initializer=clone_initializer(self.kernel_initializer),
                    dtype=self.dtype_policy,
                    name="shared_inner",
                ),
                keras.layers.Dense(
                    hidden,
                    use_bias=self.use_bias,
                    kernel_initializer=clone_initializer(self.kernel_initializer),
                    dtype=self.dtype_policy,
                    name="shared_outer",
                ),
            ]
            self.shared[0].build(inputs_shape)
            self.shared[1].build((*inputs_shape[:-1], self.shared_intermediate_size))
        self.built = True

    def routing(self, inputs):
        """float32 (the router's probabilities `[..., E]`, each token's expert weights `[..., E]`:
        its top k's, normalized where asked, 0 elsewhere)."""
        logits = ops.matmul(ops.cast(inputs, "float32"), ops.cast(self.router, "float32"))
        probabilities = ops.softmax(logits, axis=-1)
        top, _ = ops.top_k(probabilities, self.experts_per_token)  # [..., k], largest first
        chosen = ops.cast(probabilities >= top[..., -1:], "float32")  # ties at the k-th keep all of them
        weights = probabilities * chosen
        if self.normalize_weights:
            weights = weights / ops.sum(weights, axis=-1, keepdims=True)
        return probabilities, weights

    def call(self, inputs, training=None):
        probabilities, weights = self.routing(inputs)
        inner = ops.einsum("...h,ehi->...ei", inputs, self.inner_kernel)  # [..., E, I]
        if self.use_bias:
            inner = inner + self.inner_bias
        outer = ops.einsum("...ei,eih->...eh", self._activation(inner), self.outer_kernel)  # [..., E, H]
        if self.use_bias:
            outer = outer + self.outer_bias
        output = ops.einsum("...eh,...e->...h", outer, ops.cast(weights, outer.dtype))
        if self.shared is not None:
            output = output + self.shared[1](self.shared[0](inputs))
        if training and self.aux_loss_weight:
            self.add_loss(self.aux_loss_weight * load_balancing_loss(probabilities, weights))
        return output

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        return {
            **super().get_config(),
            "num_experts": self.num_experts,
            "intermediate_size": self.intermediate_size,
            "experts_per_token": self.experts_per_token,
            "activation": self.activation,
            "shared_intermediate_size": self.shared_intermediate_size,
            "normalize_weights": self.normalize_weights,
            "aux_loss_weight": self.aux_loss_weight,
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }


def load_balancing_loss(probabilities: TensorLike, weights: TensorLike) -> TensorLike:
    """Switch Transformer's load-balancing loss E · Σ_e f_e · P_e of router `probabilities`
    `[..., E]` and the chosen experts' `weights` `[..., E]` (nonzero where chosen): f_e the share
    of the assignments that go to expert e, P_e the mean probability of e. 1 when both are uniform."""
    experts = ops.shape(probabilities)[-1]
    probabilities = ops.reshape(probabilities, (-1, experts))
    chosen = ops.cast(ops.reshape(weights, (-1, experts)) > 0, "float32")
    shares = ops.sum(chosen, axis=0) / ops.maximum(ops.sum(chosen), 1.0)  # f_e
    return ops.cast(experts, "float32") * ops.sum(shares * ops.mean(probabilities, axis=0))

"""Sequence-level classification heads (task classifiers, next-sentence / sentence-order)."""

import keras
from keras import ops

from bertlayers.layers.activations import canonical_activation, get_activation
from bertlayers.layers.initializers import bert_initializer, clone_initializer


@keras.saving.register_keras_serializable(package="bertlayers")
class ClassificationHead(keras.layers.Layer):
    """logits = W · Dropout([act(W_in · x)]) + b over one vector per example.

    With `inner_dim=0` (BERT fine-tuning) the input, usually the pooled output, goes straight
    to the output layer; `inner_dim > 0` adds RoBERTa's dense + tanh transform first.

    Args:
      num_classes: number of logits (1 for regression).
      inner_dim: width of the optional inner transform; 0 for none.
      activation: activation of the inner transform.
      dropout: dropout rate before the output layer.
      kernel_initializer: initializer of the kernels.
      use_bias: whether the output layer has a bias (transformers' last-token classifiers of
        decoder families, `score`, have none).

    Call args:
      inputs: `[batch, H]`.

    Returns:
      float32 logits `[batch, num_classes]`.
    """

    def __init__(
        self,
        num_classes: int,
        inner_dim: int = 0,
        activation: str = "tanh",
        dropout: float = 0.1,
        kernel_initializer: str | keras.initializers.Initializer | None = None,
        use_bias: bool = True,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if int(num_classes) <= 0:
            raise ValueError(f"num_classes must be > 0, got {num_classes}.")
        self.num_classes = int(num_classes)
        self.inner_dim = int(inner_dim)
        self.activation = canonical_activation(activation)
        self.dropout = float(dropout)
        self.kernel_initializer = keras.initializers.get(kernel_initializer or bert_initializer())
        self.use_bias = bool(use_bias)
        self._activation_fn = get_activation(self.activation)

    def build(self, inputs_shape):
        width = inputs_shape[-1]
        if self.inner_dim:
            self.inner_dense = keras.layers.Dense(
                self.inner_dim,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                dtype=self.dtype_policy,
                name="inner",
            )
            self.inner_dense.build(inputs_shape)
            width = self.inner_dim
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.output_dense = keras.layers.Dense(
            self.num_classes,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            use_bias=self.use_bias,
            dtype=self.dtype_policy,
            name="logits",
        )
        self.output_dense.build(tuple(inputs_shape[:-1]) + (width,))
        self.built = True

    def call(self, inputs, training=None):
        x = inputs
        if self.inner_dim:
            x = self._activation_fn(self.inner_dense(x))
        x = self.dropout_layer(x, training=training)
        return ops.cast(self.output_dense(x), "float32")

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape[:-1]) + (self.num_classes,)

    def compute_output_spec(self, inputs, training=None):
        return keras.KerasTensor(self.compute_output_shape(inputs.shape), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_classes": self.num_classes,
                "inner_dim": self.inner_dim,
                "activation": self.activation,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "use_bias": self.use_bias,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="bertlayers")
class NextSentenceHead(ClassificationHead):
    """Two logits from the pooled output: BERT's next-sentence prediction
    (`cls/seq_relationship`; 0 = B follows A, 1 = B is random) or ALBERT's sentence-order
    prediction (0 = in order, 1 = swapped).

    Call args:
      pooled: `[batch, H]`.

    Returns:
      float32 logits `[batch, 2]`.
    """

    _FIXED = ("num_classes", "inner_dim", "activation", "dropout", "use_bias")

    def __init__(self, kernel_initializer: str | keras.initializers.Initializer | None = None, **kwargs) -> None:
        super().__init__(num_classes=2, inner_dim=0, dropout=0.0, kernel_initializer=kernel_initializer, **kwargs)

    def get_config(self):
        config = super().get_config()
        for key in self._FIXED:
            config.pop(key)
        return config

"""BERT's pooler: the first ([CLS]) token through a dense layer with tanh."""

import keras

from bertlayers.layers.initializers import bert_initializer


@keras.saving.register_keras_serializable(package="bertlayers")
class Pooler(keras.layers.Layer):
    """pooled = tanh(W · sequence[:, 0] + b)

    Args:
      kernel_initializer: initializer of `W` `[H, H]`.

    Call args:
      sequence: `[batch, seq, H]`.

    Returns:
      `[batch, H]`.
    """

    def __init__(self, kernel_initializer=None, **kwargs):
        super().__init__(**kwargs)
        self.kernel_initializer = keras.initializers.get(kernel_initializer or bert_initializer())

    def build(self, sequence_shape):
        self.dense = keras.layers.Dense(
            sequence_shape[-1],
            activation="tanh",
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="dense",
        )
        self.dense.build((sequence_shape[0], sequence_shape[-1]))
        self.built = True

    def call(self, sequence):
        return self.dense(sequence[:, 0, :])

    def compute_output_shape(self, sequence_shape):
        return (sequence_shape[0], sequence_shape[-1])

    def get_config(self):
        config = super().get_config()
        config["kernel_initializer"] = keras.initializers.serialize(self.kernel_initializer)
        return config

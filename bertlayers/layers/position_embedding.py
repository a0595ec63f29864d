"""Learned absolute position embedding."""

import keras
from keras import ops

from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.input_checks import check_sequence_length


@keras.saving.register_keras_serializable(package="bertlayers")
class PositionEmbedding(keras.layers.Layer):
    """A learned vector per position, `[max_sequence_length, width]`.

    Args:
      max_sequence_length: the number of positions (512 in BERT).
      initializer: initializer of the table.

    Call args:
      inputs: `[batch, seq, width]`; only its shape is used.

    Returns:
      `[batch, seq, width]`: the embedding of positions 0..seq-1, broadcast over the batch.
    """

    def __init__(
        self, max_sequence_length: int, initializer: str | keras.initializers.Initializer | None = None, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        if int(max_sequence_length) <= 0:
            raise ValueError(f"max_sequence_length must be > 0, got {max_sequence_length}.")
        self.max_sequence_length = int(max_sequence_length)
        self.initializer = keras.initializers.get(initializer or bert_initializer())

    def build(self, inputs_shape):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_sequence_length, inputs_shape[-1]),
            initializer=self.initializer,
        )
        self.built = True

    def call(self, inputs):
        inputs = check_sequence_length(inputs, self.max_sequence_length, "the input sequence")
        seq_length = ops.shape(inputs)[1]
        table = ops.convert_to_tensor(self.embeddings)  # JAX slices arrays, not Keras variables
        positions = ops.slice(table, (0, 0), (seq_length, ops.shape(table)[1]))
        return ops.broadcast_to(ops.cast(positions, self.compute_dtype), ops.shape(inputs))

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_sequence_length": self.max_sequence_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config

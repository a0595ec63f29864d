"""Per-token classification head (NER, tagging)."""

import keras
from keras import ops

from bertlayers.layers.initializers import bert_initializer


@keras.saving.register_keras_serializable(package="bertlayers")
class TokenClassificationHead(keras.layers.Layer):
    """logits = W · Dropout(sequence) + b for every token.

    Args:
      num_classes: number of tags.
      dropout: dropout rate on the sequence output.
      kernel_initializer: initializer of `W`.

    Call args:
      sequence: `[batch, seq, H]`.

    Returns:
      float32 logits `[batch, seq, num_classes]`.
    """

    def __init__(
        self,
        num_classes: int,
        dropout: float = 0.1,
        kernel_initializer: str | keras.initializers.Initializer | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if int(num_classes) <= 0:
            raise ValueError(f"num_classes must be > 0, got {num_classes}.")
        self.num_classes = int(num_classes)
        self.dropout = float(dropout)
        self.kernel_initializer = keras.initializers.get(kernel_initializer or bert_initializer())

    def build(self, sequence_shape):
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.dense = keras.layers.Dense(
            self.num_classes,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="logits",
        )
        self.dense.build(sequence_shape)
        self.built = True

    def call(self, sequence, training=None):
        return ops.cast(self.dense(self.dropout_layer(sequence, training=training)), "float32")

    def compute_output_spec(self, sequence, training=None):
        return keras.KerasTensor(tuple(sequence.shape[:-1]) + (self.num_classes,), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_classes": self.num_classes,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config

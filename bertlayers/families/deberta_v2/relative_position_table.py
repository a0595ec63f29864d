"""The table of relative-position vectors an encoder's every layer reads (DeBERTa's
`rel_embeddings`): one learned row per bucketed distance, normalized once for the whole stack."""

import keras
from keras import ops

from bertlayers.layers.initializers import bert_initializer


@keras.saving.register_keras_serializable(package="bertlayers")
class RelativePositionTable(keras.layers.Layer):
    """`[2 * span, H]` learned vectors, one per relative distance -span..span-1, LayerNorm-ed
    when `normalize` (DeBERTa-v3's `norm_rel_ebd: "layer_norm"`).

    The table is a weight, not a function of the input; the call takes the encoder's hidden
    states only to place the table in the functional graph.

    Args:
      rows: 2 * span, the table's length.
      hidden_size: H.
      normalize: a LayerNorm over each row.
      layer_norm_epsilon: its epsilon.
      dropout: dropout on the table in training (transformers' `pos_dropout`).
      initializer: initializer of the rows.

    Call args:
      inputs: any `[batch, seq, H]` tensor (unread).

    Returns:
      `[1, rows, H]`: the (normalized) table, batch-first with one row so that a functional
      model carries it; `DisentangledAttention` reads it as one table.
    """

    def __init__(
        self,
        rows: int,
        hidden_size: int,
        normalize: bool = True,
        layer_norm_epsilon: float = 1e-7,
        dropout: float = 0.0,
        initializer: str | keras.initializers.Initializer | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.rows = int(rows)
        self.hidden_size = int(hidden_size)
        self.normalize = bool(normalize)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.dropout = float(dropout)
        self.initializer = keras.initializers.get(initializer or bert_initializer())
        if self.rows < 2 or self.rows % 2:
            raise ValueError(f"RelativePositionTable takes an even number of rows >= 2 (2 * span), got {rows}.")

    def build(self, inputs_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.rows, self.hidden_size), initializer=self.initializer
        )
        self.layer_norm = None
        if self.normalize:
            self.layer_norm = keras.layers.LayerNormalization(
                epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm"
            )
            self.layer_norm.build((self.rows, self.hidden_size))
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def call(self, inputs=None, training=None):
        table = ops.cast(self.embeddings, self.compute_dtype)  # [2S, H]
        if self.layer_norm is not None:
            table = self.layer_norm(table)
        return ops.expand_dims(self.dropout_layer(table, training=training), 0)  # [1, 2S, H]

    def compute_output_shape(self, inputs_shape=None):
        return (1, self.rows, self.hidden_size)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "rows": self.rows,
                "hidden_size": self.hidden_size,
                "normalize": self.normalize,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "dropout": self.dropout,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config

"""ALBERT's factorized embedding parameterization."""

import keras

from bertlayers.layers.bert_embeddings import BertEmbeddings
from bertlayers.layers.initializers import clone_initializer


@keras.saving.register_keras_serializable(package="bertlayers")
class FactorizedEmbedding(BertEmbeddings):
    """Embed at a small width E, then project to the hidden width H.

    Parameters: V·E + E·H instead of BERT's V·H (with V=30k, E=128, H=4096: 4.4M instead
    of 123M). The sum token + segment + position, its LayerNorm and dropout run at width E, as
    in ALBERT (all of `BertEmbeddings`); `embedding_projection` then maps E → H.

    Args:
      hidden_size: `H`.
      vocabulary_size, embedding_size (`E`), max_sequence_length, type_vocab_size,
        layer_norm_epsilon, dropout, initializer: as in `BertEmbeddings`.

    Call args:
      token_ids: int `[batch, seq]`.
      segment_ids: int `[batch, seq]`; all zeros when omitted.

    Returns:
      `[batch, seq, hidden_size]`.
    """

    def __init__(self, vocabulary_size: int, embedding_size: int, hidden_size: int, **kwargs) -> None:
        super().__init__(vocabulary_size, embedding_size, **kwargs)
        self.hidden_size = int(hidden_size)
        self.embedding_projection = keras.layers.Dense(
            self.hidden_size,
            kernel_initializer=clone_initializer(self.initializer),
            dtype=self.dtype_policy,
            name="embedding_projection",
        )

    def build(self, token_ids_shape, segment_ids_shape=None):
        super().build(token_ids_shape)
        self.embedding_projection.build(tuple(token_ids_shape) + (self.embedding_size,))

    def call(self, token_ids, segment_ids=None, training=None, positions=None):
        return self.embedding_projection(super().call(token_ids, segment_ids, training=training, positions=positions))

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None):
        return tuple(token_ids_shape) + (self.hidden_size,)

    def get_config(self):
        config = super().get_config()
        config["hidden_size"] = self.hidden_size
        return config

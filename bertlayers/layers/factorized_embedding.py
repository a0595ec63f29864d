"""ALBERT's factorized embedding parameterization."""

import keras

from bertlayers.layers.bert_embeddings import BertEmbeddings
from bertlayers.layers.initializers import bert_initializer, clone_initializer


@keras.saving.register_keras_serializable(package="bertlayers")
class FactorizedEmbedding(keras.layers.Layer):
    """Embed at a small width E, then project to the hidden width H.

    Parameters: V·E + E·H instead of BERT's V·H (with V=30k, E=128, H=4096: 4.4M instead
    of 123M). The sum token + segment + position, its LayerNorm and dropout run at width E, as
    in ALBERT; `embedding_projection` then maps E → H.

    Args:
      vocabulary_size: `V`.
      embedding_size: `E`.
      hidden_size: `H`.
      max_sequence_length, type_vocab_size, layer_norm_epsilon, dropout, initializer: as in
        `BertEmbeddings`.

    Call args:
      token_ids: int `[batch, seq]`.
      segment_ids: int `[batch, seq]`; all zeros when omitted.

    Returns:
      `[batch, seq, hidden_size]`.
    """

    def __init__(
        self,
        vocabulary_size,
        embedding_size,
        hidden_size,
        max_sequence_length=512,
        type_vocab_size=2,
        layer_norm_epsilon=1e-12,
        dropout=0.1,
        initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = int(hidden_size)
        self.initializer = keras.initializers.get(initializer or bert_initializer())
        self.embeddings = BertEmbeddings(
            vocabulary_size=vocabulary_size,
            embedding_size=embedding_size,
            max_sequence_length=max_sequence_length,
            type_vocab_size=type_vocab_size,
            layer_norm_epsilon=layer_norm_epsilon,
            dropout=dropout,
            initializer=clone_initializer(self.initializer),
            dtype=self.dtype_policy,
            name="embeddings",
        )
        self.embedding_projection = keras.layers.Dense(
            self.hidden_size,
            kernel_initializer=clone_initializer(self.initializer),
            dtype=self.dtype_policy,
            name="embedding_projection",
        )

    @property
    def token_embedding(self):
        """The `[V, E]` ReversibleEmbedding that a masked-LM head ties to."""
        return self.embeddings.token_embedding

    def build(self, token_ids_shape, segment_ids_shape=None):
        self.embeddings.build(token_ids_shape)
        self.embedding_projection.build(tuple(token_ids_shape) + (self.embeddings.embedding_size,))
        self.built = True

    def call(self, token_ids, segment_ids=None, training=None):
        return self.embedding_projection(self.embeddings(token_ids, segment_ids, training=training))

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None):
        return tuple(token_ids_shape) + (self.hidden_size,)

    def get_config(self):
        config = super().get_config()
        inner = self.embeddings
        config.update(
            {
                "vocabulary_size": inner.vocabulary_size,
                "embedding_size": inner.embedding_size,
                "hidden_size": self.hidden_size,
                "max_sequence_length": inner.max_sequence_length,
                "type_vocab_size": inner.type_vocab_size,
                "layer_norm_epsilon": inner.layer_norm_epsilon,
                "dropout": inner.dropout,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config

"""BERT's input embeddings: token + segment + position, then LayerNorm and dropout."""

import keras
from keras import ops

from bertlayers.layers.initializers import bert_initializer, clone_initializer
from bertlayers.layers.input_checks import check_id_range, check_integer_ids, check_rank, check_same_shape
from bertlayers.layers.position_embedding import PositionEmbedding


@keras.saving.register_keras_serializable(package="bertlayers")
class BertEmbeddings(keras.layers.Layer):
    """E = Dropout(LN(TokenEmb[token_ids] + SegmentEmb[segment_ids] + PositionEmb[0..seq)))

    The token table is a `keras.layers.ReversibleEmbedding`, exposed as `token_embedding`, so
    a masked-LM head can tie its output projection to it.

    Args:
      vocabulary_size: number of WordPiece ids `V`.
      embedding_size: width of every table (the hidden size in BERT, `E` in ALBERT).
      max_sequence_length: number of learned positions.
      type_vocab_size: number of segment ids (2: sentence A and B); 0 for none (DistilBERT:
        segment ids are then ignored).
      layer_norm_epsilon: LayerNorm epsilon (1e-12 in BERT).
      dropout: dropout rate after the LayerNorm.
      initializer: initializer of the three tables.
      tie_weights: False gives `token_embedding` a separate output matrix for the heads'
        `reverse=True` projection (an untied LM head).

    Call args:
      token_ids: int `[batch, seq]`.
      segment_ids: int `[batch, seq]`; all zeros when omitted.

    Returns:
      `[batch, seq, embedding_size]`.
    """

    def __init__(
        self,
        vocabulary_size: int,
        embedding_size: int,
        max_sequence_length: int = 512,
        type_vocab_size: int = 2,
        layer_norm_epsilon: float = 1e-12,
        dropout: float = 0.1,
        initializer: str | keras.initializers.Initializer | None = None,
        tie_weights: bool = True,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.tie_weights = bool(tie_weights)
        self.vocabulary_size = int(vocabulary_size)
        self.embedding_size = int(embedding_size)
        self.max_sequence_length = int(max_sequence_length)
        self.type_vocab_size = int(type_vocab_size)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.dropout = float(dropout)
        self.initializer = keras.initializers.get(initializer or bert_initializer())

        self.token_embedding = keras.layers.ReversibleEmbedding(
            self.vocabulary_size,
            self.embedding_size,
            tie_weights=self.tie_weights,
            embeddings_initializer=clone_initializer(self.initializer),
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        self.segment_embedding = None
        if self.type_vocab_size:
            self.segment_embedding = keras.layers.Embedding(
                self.type_vocab_size,
                self.embedding_size,
                embeddings_initializer=clone_initializer(self.initializer),
                dtype=self.dtype_policy,
                name="segment_embedding",
            )
        self.position_embedding = PositionEmbedding(
            self.max_sequence_length,
            initializer=clone_initializer(self.initializer),
            dtype=self.dtype_policy,
            name="position_embedding",
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm"
        )
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)

    def build(self, token_ids_shape, segment_ids_shape=None):
        embedded_shape = tuple(token_ids_shape) + (self.embedding_size,)
        self.token_embedding.build(token_ids_shape)
        if self.segment_embedding is not None:
            self.segment_embedding.build(token_ids_shape)
        self.position_embedding.build(embedded_shape)
        self.layer_norm.build(embedded_shape)
        self.built = True

    def call(self, token_ids, segment_ids=None, training=None):
        check_integer_ids(token_ids, "token_ids")
        check_rank(token_ids, 2, "token_ids", "[batch, seq]")
        if segment_ids is None:
            segment_ids = ops.zeros_like(token_ids)
        check_integer_ids(segment_ids, "segment_ids")
        segment_ids = check_same_shape({"token_ids": token_ids, "segment_ids": segment_ids})["segment_ids"]
        token_ids = check_id_range(token_ids, self.vocabulary_size, "token_ids", "the vocabulary size")
        embedded = self.token_embedding(token_ids)
        if self.segment_embedding is not None:
            segment_ids = check_id_range(segment_ids, self.type_vocab_size, "segment_ids", "type_vocab_size")
            embedded = embedded + self.segment_embedding(segment_ids)
        embedded = embedded + self.position_embedding(embedded)
        return self.dropout_layer(self.layer_norm(embedded), training=training)

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None):
        return tuple(token_ids_shape) + (self.embedding_size,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "embedding_size": self.embedding_size,
                "max_sequence_length": self.max_sequence_length,
                "type_vocab_size": self.type_vocab_size,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "dropout": self.dropout,
                "initializer": keras.initializers.serialize(self.initializer),
                "tie_weights": self.tie_weights,
            }
        )
        return config

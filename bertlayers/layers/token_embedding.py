"""Token embeddings alone, for models whose positions and segments enter through attention
(XLNet's relative encodings) rather than through tables added to the input."""

import keras

from bertlayers.layers.initializers import bert_initializer, clone_initializer
from bertlayers.layers.input_checks import (
    check_id_range,
    check_integer_ids,
    check_rank,
    check_same_shape,
    check_sequence_length,
)


@keras.saving.register_keras_serializable(package="bertlayers")
class TokenEmbedding(keras.layers.Layer):
    """E = Dropout(TokenEmb[token_ids])

    The table is a `keras.layers.ReversibleEmbedding`, exposed as `token_embedding` (the LM
    head ties its output projection to it). Segment ids are checked, not embedded.

    Args:
      vocabulary_size: V.
      embedding_size: width of the table (the hidden size).
      max_sequence_length: the longest sequence the model takes (nothing is learned per
        position; longer inputs are refused by name all the same, as the exports promise).
      type_vocab_size: number of segment ids the model takes.
      dropout: dropout rate on the embeddings.
      initializer: initializer of the table.
      tie_weights: False gives `token_embedding` a separate output matrix (an untied LM head).

    Call args:
      token_ids, segment_ids: int `[batch, seq]`.

    Returns:
      `[batch, seq, embedding_size]`.
    """

    def __init__(
        self,
        vocabulary_size: int,
        embedding_size: int,
        max_sequence_length: int = 512,
        type_vocab_size: int = 3,
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
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)

    def build(self, token_ids_shape, segment_ids_shape=None):
        self.token_embedding.build(token_ids_shape)
        self.built = True

    def call(self, token_ids, segment_ids=None, training=None, positions=None):
        del positions  # nothing is learned per position
        check_integer_ids(token_ids, "token_ids")
        check_rank(token_ids, 2, "token_ids", "[batch, seq]")
        token_ids = check_id_range(token_ids, self.vocabulary_size, "token_ids", "the vocabulary size")
        token_ids = check_sequence_length(token_ids, self.max_sequence_length, "the input sequence")
        if segment_ids is not None:
            check_integer_ids(segment_ids, "segment_ids")
            segment_ids = check_same_shape({"token_ids": token_ids, "segment_ids": segment_ids})["segment_ids"]
            if self.type_vocab_size:  # none: segment ids are read by no one (as in BertEmbeddings)
                check_id_range(segment_ids, self.type_vocab_size, "segment_ids", "type_vocab_size")
        return self.dropout_layer(self.token_embedding(token_ids), training=training)

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
                "dropout": self.dropout,
                "initializer": keras.initializers.serialize(self.initializer),
                "tie_weights": self.tie_weights,
            }
        )
        return config

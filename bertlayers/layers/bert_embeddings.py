"""BERT's input embeddings: token + segment + position, then LayerNorm and dropout (or, in a
rotary model, token + segment alone: its positions enter through attention)."""

import keras
from keras import ops

from bertlayers.layers.initializers import bert_initializer, clone_initializer
from bertlayers.layers.input_checks import (
    check_id_range,
    check_integer_ids,
    check_rank,
    check_same_shape,
    check_sequence_length,
)
from bertlayers.layers.position_embedding import PositionEmbedding
from bertlayers.layers.registered import registered_class, registered_name


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
      learned_positions: add the learned position table; False for models whose positions
        enter through attention (rotary: ModernBERT, GTE, NomicBERT), which still refuse
        sequences longer than `max_sequence_length` by name.
      normalization: the norm's class (or its registered name); default LayerNorm
        (`BiasFreeLayerNorm` in ModernBERT).

    Call args:
      token_ids: int `[batch, seq]`.
      segment_ids: int `[batch, seq]`; all zeros when omitted.
      positions: int `[batch, seq]`, each token's position (packed rows restart them in every
        sequence); None: 0..seq-1.

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
        learned_positions: bool = True,
        normalization: str | type | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.tie_weights = bool(tie_weights)
        self.learned_positions = bool(learned_positions)
        self._normalization = registered_class(normalization, "normalization") if normalization is not None else None
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
        self.position_embedding = None
        if self.learned_positions:
            self.position_embedding = PositionEmbedding(
                self.max_sequence_length,
                initializer=clone_initializer(self.initializer),
                dtype=self.dtype_policy,
                name="position_embedding",
            )
        self.layer_norm = (self._normalization or keras.layers.LayerNormalization)(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm"
        )
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)

    def build(self, token_ids_shape, segment_ids_shape=None):
        embedded_shape = tuple(token_ids_shape) + (self.embedding_size,)
        if not self.token_embedding.built:  # a table shared with another model's embeddings is built there
            self.token_embedding.build(token_ids_shape)
        if self.segment_embedding is not None:
            self.segment_embedding.build(token_ids_shape)
        if self.position_embedding is not None:
            self.position_embedding.build(embedded_shape)
        self.layer_norm.build(embedded_shape)
        self.built = True

    def call(self, token_ids, segment_ids=None, training=None, positions=None):
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
        if self.position_embedding is not None and positions is not None:  # packed rows
            table = ops.convert_to_tensor(self.position_embedding.embeddings)
            embedded = embedded + ops.cast(ops.take(table, positions, axis=0), embedded.dtype)
        elif self.position_embedding is not None:
            embedded = embedded + self.position_embedding(embedded)
        else:
            embedded = check_sequence_length(embedded, self.max_sequence_length, "the input sequence")
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
                "learned_positions": self.learned_positions,
                "normalization": registered_name(self._normalization) if self._normalization else None,
            }
        )
        return config

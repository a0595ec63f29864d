"""SpanBERT's span-boundary objective head (Joshi et al. 2020)."""

import keras
from keras import ops

from bertlayers import backend
from bertlayers.layers.initializers import bert_initializer, clone_initializer
from bertlayers.layers.input_checks import check_integer_ids


@keras.saving.register_keras_serializable(package="bertlayers")
class SpanBoundaryHead(keras.layers.Layer):
    """Predict each token of a masked span from the span's two outside tokens and its offset.

    For a token at offset i inside the masked span [s, e]:
        h = [x(s-1); x(e+1); P(i)]                         [batch, P, 2H + D]
        h = LN(GELU(W1 · h + b1))                          [batch, P, H]
        h = LN(GELU(W2 · h + b2))                          [batch, P, E]
        logits = h · TokenEmbᵀ + output_bias               [batch, P, V]
    with x the encoder output, P a learned offset embedding of width D. The output projection
    is the encoder's token embedding (tied) with the head's own bias. No anchor library
    ships this head; the definitions follow the paper and facebookresearch/SpanBERT.

    Args:
      token_embedding: the encoder's `ReversibleEmbedding` `[V, E]` (tied output).
      max_span_length: rows of the offset table; longer spans (adjacent spans merge) share
        the last row.
      position_embedding_size: D; default the hidden size.
      layer_norm_epsilon: LayerNorm epsilon.
      kernel_initializer: initializer of the kernels and the offset table.

    Call args:
      sequence: `[batch, seq, H]` encoder output.
      left_positions, right_positions: int `[batch, P]`, the tokens just outside each span
        (entries with no prediction may point anywhere in range, weighted out of the loss).
      offsets: int `[batch, P]`, each predicted token's index inside its span (0 = first).

    Returns:
      float32 logits `[batch, P, V]`.
    """

    def __init__(
        self,
        token_embedding,
        max_span_length=30,
        position_embedding_size=None,
        layer_norm_epsilon=1e-12,
        kernel_initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(token_embedding, dict):
            token_embedding = keras.layers.deserialize(token_embedding)
        self.token_embedding = token_embedding
        self.max_span_length = int(max_span_length)
        self.position_embedding_size = None if position_embedding_size is None else int(position_embedding_size)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.kernel_initializer = keras.initializers.get(kernel_initializer or bert_initializer())

    def build(self, sequence_shape, left_positions_shape=None, right_positions_shape=None, offsets_shape=None):
        hidden_size = sequence_shape[-1]
        width = self.token_embedding.output_dim
        position_size = self.position_embedding_size or hidden_size
        gathered = (sequence_shape[0], None)
        self.offset_embedding = keras.layers.Embedding(
            self.max_span_length,
            position_size,
            embeddings_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="offset_embedding",
        )
        self.offset_embedding.build(gathered)
        self.dense_1 = keras.layers.Dense(
            hidden_size,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="dense_1",
        )
        self.dense_1.build(gathered + (2 * hidden_size + position_size,))
        self.layer_norm_1 = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm_1"
        )
        self.layer_norm_1.build(gathered + (hidden_size,))
        self.dense_2 = keras.layers.Dense(
            width,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="dense_2",
        )
        self.dense_2.build(gathered + (hidden_size,))
        self.layer_norm_2 = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm_2"
        )
        self.layer_norm_2.build(gathered + (width,))
        if not self.token_embedding.built:
            self.token_embedding.build()
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.token_embedding.input_dim,), initializer="zeros"
        )
        self.built = True

    def call(self, sequence, left_positions, right_positions, offsets):
        for value, name in (
            (left_positions, "left_positions"),
            (right_positions, "right_positions"),
            (offsets, "offsets"),
        ):
            check_integer_ids(value, name)

        def at(positions):
            return backend.rows_at(sequence, positions)  # [batch, P, H]

        offsets = ops.minimum(offsets, self.max_span_length - 1)
        hidden = ops.concatenate([at(left_positions), at(right_positions), self.offset_embedding(offsets)], axis=-1)
        gelu = lambda x: keras.activations.gelu(x, approximate=False)  # noqa: E731
        hidden = self.layer_norm_1(gelu(self.dense_1(hidden)))  # [batch, P, H]
        hidden = self.layer_norm_2(gelu(self.dense_2(hidden)))  # [batch, P, E]
        logits = self.token_embedding(hidden, reverse=True)  # [batch, P, V]
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def compute_output_spec(self, sequence, left_positions, right_positions, offsets):
        return keras.KerasTensor(tuple(left_positions.shape) + (self.token_embedding.input_dim,), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "token_embedding": keras.layers.serialize(self.token_embedding),
                "max_span_length": self.max_span_length,
                "position_embedding_size": self.position_embedding_size,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config

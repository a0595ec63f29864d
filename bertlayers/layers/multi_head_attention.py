"""Multi-head scaled dot-product attention (BERT's `attention/self` + `attention/output/dense`)."""

import math

import keras
from keras import ops

from bertlayers import backend
from bertlayers.layers.initializers import bert_initializer, clone_initializer
from bertlayers.layers.masking import mask_logits, per_query_attention_mask
from bertlayers.layers.registered import registered_class, registered_name
from bertlayers.layers.sliding_window import banded_attention


@keras.saving.register_keras_serializable(package="bertlayers")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention with the masked softmax computed in float32.

    This is the default attention of `TransformerEncoderBlock`. Any layer with the same call
    signature (query, value, attention_mask, return_attention_scores, training, and
    query_positions if it uses positions) can replace it, which is how rotary, relative or
    two-stream attention plugs into the same block.

    Args:
      num_heads: number of attention heads `N`.
      key_dim: size of each head `D`; the hidden width is usually `N * D`.
      dropout: dropout rate on the attention probabilities.
      use_bias: whether the projections have biases.
      kernel_initializer: initializer of the projection kernels.
      num_key_value_heads: grouped-query attention (Ainslie et al. 2023; EuroBERT, Llama): keys
        and values are projected to this many heads, each shared by `num_heads / num_key_value_heads`
        query heads (query head h reads key head h // that); None: one per query head.
      query_key_norm_epsilon: where set, each head's projected queries and keys pass a norm over
        their D dimensions (a scale of D each, shared by the heads) before they are positioned and
        scored (Qwen3, Gemma 3); None: no such norm.
      query_key_normalization: that norm's class or registered name (default Keras's
        `RMSNormalization`; Gemma's scales by 1 + weight).
      scale: the factor of the query-key dot products; None: 1 / sqrt(D) (Gemma 3 takes
        1 / sqrt(query_pre_attn_scalar)).

    Call args:
      query: `[batch, query_len, hidden]`.
      value: `[batch, key_len, hidden]`; defaults to `query` (self-attention).
      attention_mask: boolean-like `[batch, query_len, key_len]` or `[batch, 1, key_len]`,
        true where attention is allowed; None attends everywhere.
      return_attention_scores: also return the probabilities `[batch, N, query_len, key_len]`.
      query_positions: where the queries sit in the sequence (int `[batch, query_len]`); content
        attention does not depend on it (position-aware layers, rotary say, use it).
      key_positions: where the keys sit (int `[batch, key_len]`; default 0..key_len-1): packed
        rows restart positions in every sequence.
      attention_window: attend only to keys within `attention_window // 2` positions, computed
        band by band (`bertlayers.layers.sliding_window`: linear in the sequence length); the
        mask is then a key mask `[batch, 1, key_len]`, and the queries are all the positions.

    Returns:
      `[batch, query_len, hidden]` (and the probabilities, if asked for).
    """

    # What `TransformerEncoderBlock` may pass to `call` besides the query, value and mask. An
    # attention layer of another kind says what it takes the same way; one that says nothing is
    # passed none of them (its block then computes no rows alone and windows by a dense mask).
    position_arguments = frozenset({"query_positions", "key_positions", "attention_window"})

    def __init__(
        self,
        num_heads: int,
        key_dim: int,
        dropout: float = 0.0,
        use_bias: bool = True,
        kernel_initializer: str | keras.initializers.Initializer | None = None,
        num_key_value_heads: int | None = None,
        query_key_norm_epsilon: float | None = None,
        query_key_normalization: str | type | None = None,
        scale: float | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.num_heads = int(num_heads)
        self.num_key_value_heads = self.num_heads if num_key_value_heads is None else int(num_key_value_heads)
        if self.num_key_value_heads <= 0 or self.num_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_key_value_heads ({num_key_value_heads}) must divide num_heads ({num_heads}): each key/value "
                "head serves an equal group of query heads."
            )
        self.key_dim = int(key_dim)
        self.dropout = float(dropout)
        self.use_bias = bool(use_bias)
        self.query_key_norm_epsilon = None if query_key_norm_epsilon is None else float(query_key_norm_epsilon)
        self._query_key_normalization = (
            registered_class(query_key_normalization, "query_key_normalization")
            if query_key_normalization is not None
            else keras.layers.RMSNormalization
        )
        self.scale = None if scale is None else float(scale)
        self.kernel_initializer = keras.initializers.get(kernel_initializer or bert_initializer())
        self.supports_masking = False

    def _projection(self, equation, output_shape, bias_axes, name):
        return keras.layers.EinsumDense(
            equation,
            output_shape=output_shape,
            bias_axes=bias_axes if self.use_bias else None,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def build(self, query_shape, value_shape=None, attention_mask_shape=None):
        value_shape = query_shape if value_shape is None else value_shape
        hidden_size = query_shape[-1]
        heads = (None, self.num_heads, self.key_dim)
        # Kernels are [hidden, heads, head_dim]: a checkpoint's [hidden, hidden] matrix
        # reshapes into them without copying.
        self.query_dense = self._projection("btd,dnh->btnh", heads, "nh", "query")
        self.query_dense.build(query_shape)
        shared = (None, self.num_key_value_heads, self.key_dim)
        self.key_dense = self._projection("btd,dnh->btnh", shared, "nh", "key")
        self.key_dense.build(value_shape)
        self.value_dense = self._projection("btd,dnh->btnh", shared, "nh", "value")
        self.value_dense.build(value_shape)
        self.output_dense = self._projection("btnh,nhd->btd", (None, hidden_size), "d", "attention_output")
        self.output_dense.build((query_shape[0], query_shape[1], self.num_heads, self.key_dim))
        self.query_norm = self.key_norm = None
        if self.query_key_norm_epsilon is not None:
            self.query_norm, self.key_norm = (
                self._query_key_normalization(epsilon=self.query_key_norm_epsilon, dtype=self.dtype_policy, name=name)
                for name in ("query_norm", "key_norm")
            )
            self.query_norm.build((None, None, self.num_heads, self.key_dim))
            self.key_norm.build((None, None, self.num_key_value_heads, self.key_dim))
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def call(
        self,
        query,
        value=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        query_positions=None,
        attention_window=None,
        key_positions=None,
    ):
        value = query if value is None else value
        query, key = self.query_dense(query), self.key_dense(value)
        value = self.value_dense(value)
        if self.query_norm is not None:  # before the scale: the norm would undo it
            query, key = self.query_norm(query), self.key_norm(key)
        # Scaling the query rather than the scores touches seq*D values instead of seq*seq.
        scale = 1.0 / math.sqrt(self.key_dim) if self.scale is None else self.scale
        query = query * ops.cast(scale, self.compute_dtype)
        query, key = self.positioned(query, key, query_positions, key_positions)  # [B, Q, N, D], [B, K, N_kv, D]
        if self.num_key_value_heads != self.num_heads:  # each key/value head to its group of query heads
            group = self.num_heads // self.num_key_value_heads
            key, value = ops.repeat(key, group, axis=2), ops.repeat(value, group, axis=2)  # [B, K, N, D]

        if attention_window is not None:
            key_mask = None if attention_mask is None else attention_mask[:, 0, :]  # [B, K]
            dropout = lambda p: self.dropout_layer(p, training=training)  # noqa: E731
            return self.output_dense(banded_attention(query, key, value, key_mask, attention_window, dropout))
        if self._fused(return_attention_scores, training, query.shape[1], key.shape[1]):
            mask = None if attention_mask is None else per_query_attention_mask(attention_mask, ops.shape(query)[1])
            # [batch, query_len, N, D]; logits and softmax in float32 inside, as below.
            context = ops.dot_product_attention(query, key, value, mask=mask, scale=1.0)
            return self.output_dense(context)
        length = query.shape[1]
        dropout_active = bool(training and self.dropout > 0)
        if length is not None and length > self.query_chunk and not return_attention_scores and not dropout_active:
            return self.output_dense(self._in_query_chunks(query, key, value, attention_mask))
        scores = ops.einsum("bqnh,bknh->bnqk", query, key)
        return self._softmax_attention(scores, value, attention_mask, return_attention_scores, training)

    def _softmax_attention(self, scores, value, attention_mask, return_attention_scores, training):
        """The masked softmax of `scores` `[B, N, Q, K]` over the keys, dropout, the weighted sum
        of `value` `[B, K, N, D]` and the output projection: `[B, Q, hidden]` (and the
        probabilities). Subclasses that score otherwise (relative positions) end here too."""
        # Softmax in float32: masked logits and exp() overflow or lose the small
        # probabilities in float16/bfloat16.
        scores = ops.cast(scores, "float32")
        if attention_mask is not None:
            scores = mask_logits(scores, ops.expand_dims(attention_mask, axis=1))
        probabilities = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
        dropped = self.dropout_layer(probabilities, training=training)

        context = ops.einsum("bnqk,bknh->bqnh", dropped, value)
        output = self.output_dense(context)
        if return_attention_scores:
            return output, probabilities
        return output

    # Queries per step when a long sequence's scores are computed a chunk of queries at a time
    # (`[batch, N, chunk, K]` at once, not `[batch, N, Q, K]`: at 8,192 tokens and 12 heads a
    # layer's scores are 3.2 GB in float32, a 2,048-query chunk's a quarter of that).
    query_chunk = 2048

    def _in_query_chunks(self, query, key, value, attention_mask):
        """Softmax attention `[B, Q, N, D]`, one chunk of `query_chunk` queries after another
        (`ops.map`: sequential, so only one chunk's scores exist at a time); equal to the whole."""
        batch, length, chunk = ops.shape(query)[0], query.shape[1], self.query_chunk
        chunks = -(-length // chunk)
        padding = chunks * chunk - length

        def split(x):  # [B, Q, ...] -> [chunks, B, chunk, ...]
            x = ops.pad(x, [[0, 0], [0, padding]] + [[0, 0]] * (len(x.shape) - 2))
            x = ops.reshape(x, (batch, chunks, chunk, *x.shape[2:]))
            return ops.moveaxis(x, 1, 0)

        rows = attention_mask is not None and attention_mask.shape[1] != 1
        masks = split(ops.cast(attention_mask, "bool")) if rows else None

        def attend(inputs):
            query_chunk, mask = inputs if rows else (inputs, attention_mask)
            scores = ops.cast(ops.einsum("bqnh,bknh->bnqk", query_chunk, key), "float32")  # [B, N, chunk, K]
            if mask is not None:
                scores = mask_logits(scores, ops.expand_dims(mask, axis=1))
            probabilities = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
            return ops.einsum("bnqk,bknh->bqnh", probabilities, value)  # [B, chunk, N, D]

        context = ops.map(attend, (split(query), masks) if rows else split(query))  # [chunks, B, chunk, N, D]
        context = ops.reshape(ops.moveaxis(context, 0, 1), (batch, chunks * chunk, *context.shape[3:]))
        return context[:, :length]

    def positioned(self, query, key, query_positions, key_positions=None):
        """The projected queries `[B, Q, N, D]` and keys `[B, K, N, D]` as the scores read them: here
        unchanged (content attention: the scores depend on the vectors alone). A position-aware
        subclass (`RotaryAttention`) rotates them; `query_positions` (int `[B, Q]`, None for
        0..Q-1) says where the queries sit, `key_positions` (`[B, K]`, None for 0..K-1) the keys
        (in packed rows, each token's place in its own sequence)."""
        del query_positions, key_positions
        return query, key

    def _fused(self, return_attention_scores, training, query_length=None, key_length=None):
        """Whether to call the backend's fused attention (`bertlayers.backend.fuses_attention`)."""
        return backend.fuses_attention(
            return_attention_scores,
            dropout_active=bool(training and self.dropout > 0),
            training=bool(training),
            lengths=(query_length, key_length),
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "num_key_value_heads": self.num_key_value_heads,
                "query_key_norm_epsilon": self.query_key_norm_epsilon,
                "query_key_normalization": registered_name(self._query_key_normalization),
                "scale": self.scale,
            }
        )
        return config

"""Relative positional attention in the Transformer-XL form, with XLNet's two streams.

Dimensions: B batch, S sequence (queries), M memory, K = M + S keys, R = K + S relative
distances, N heads, D head size, H hidden, T predicted positions.

For query i and key j (their distance i - j measured with the memory in front):

    score(i, j) = (q_i + u) · k_j                      content
                + (q_i + v) · W_r p(i - j)              position (p: sinusoids, W_r: `position`)
                + (q_i + s) · e[seg(i) != seg(j)]       segment (e: 2 learned vectors per head)

scaled by 1 / sqrt(D), masked, softmaxed over j, and the values mixed and projected back
to H (no residual here: the block adds it). u, v, s are the content, position and segment
biases per head.

Two streams share every weight. The content stream h_i attends from its own token, so it
may see itself; the query stream g_i carries only the position i (it starts from a learned
mask embedding) and is what predicts token i, so it must not. Keys and values always come
from the content stream (and the memory): a token's content reaches the query stream only
through other positions allowed to see it.
"""

import keras
from keras import ops

from bertlayers import backend
from bertlayers.layers.initializers import bert_initializer, clone_initializer
from bertlayers.layers.masking import mask_logits
from bertlayers.networks.weight_layout import MODEL_AXIS, register_model_parallel_rule

# Model parallelism: the projections are [hidden, heads, head_dim] (the output one too, used
# transposed) and the biases and segment embeddings per head: each device keeps its heads.
register_model_parallel_rule(
    r".*/attention/(query|key|value|position|output|segment_embedding)", (None, MODEL_AXIS, None)
)
register_model_parallel_rule(r".*/attention/(content|position|segment)_bias", (MODEL_AXIS, None))


def relative_shift(scores, key_length):
    """`[B, N, S, R]` scores over the R = K + S relative distances K, K-1, ..., -S+1, to
    `[B, N, S, K]` scores over the keys: out[..., i, j] = scores[..., i, S - i + j].

    Viewing the rows shifted by one (reshape, drop the first row, reshape back) moves row i
    left by S - i without a gather: Transformer-XL's trick.
    """
    shape = ops.shape(scores)
    batch, heads, length, distances = shape[0], shape[1], shape[2], shape[3]
    x = ops.reshape(scores, (batch, heads, distances, length))  # [B, N, R, S]
    x = x[:, :, 1:, :]  # [B, N, R - 1, S]
    x = ops.reshape(x, (batch, heads, length, distances - 1))  # [B, N, S, R - 1]
    if backend.symbolic_sizes_share_symbols() and not isinstance(distances, int):
        # Inferring a functional model's shapes, JAX gives every unknown size one symbol, so
        # R (= K + S) reads as K and R - 1 < K; one column of padding makes the slice below
        # valid there. Real calls have concrete sizes and never come here.
        x = ops.pad(x, ((0, 0), (0, 0), (0, 0), (0, 1)))
    return ops.slice(x, (0, 0, 0, 0), (batch, heads, length, key_length))  # [B, N, S, K]


@keras.saving.register_keras_serializable(package="bertlayers")
class RelativeAttention(keras.layers.Layer):
    """Multi-head relative attention (content, position and segment terms), one or two streams.

    Args:
      num_heads: N.
      head_size: D (XLNet: H / N).
      attention_dropout: dropout on the attention probabilities.
      kernel_initializer: initializer of the projections and biases.

    Call args:
      content: `[B, S, H]`, the content stream.
      position_encoding: `[1 or B, R, H]` sinusoids for distances K, ..., -S+1.
      content_mask: `[B, S, K]`, nonzero where content position i may see key j.
      segment_matrix: `[B, S, K]`, 1 where i and j lie in different segments, or None.
      memory: `[B, M, H]` earlier states prepended to the keys and values, or None.
      query: `[B, T, H]` the query stream (T = S without `target_mapping`), or None.
      query_mask: `[B, S, K]`, nonzero where the query stream at i may see key j.
      target_mapping: `[B, T, S]` one-hot rows placing each query at its position, or None.
      return_attention_scores: also return the probabilities `[B, N, S, K]` of each stream.

    Returns:
      content `[B, S, H]` without a query stream, else `(content, query [B, T, H])`; with
      `return_attention_scores`, each stream's probabilities follow.
    """

    def __init__(self, num_heads, head_size, attention_dropout=0.1, kernel_initializer=None, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = int(num_heads)
        self.head_size = int(head_size)
        self.attention_dropout = float(attention_dropout)
        self.kernel_initializer = keras.initializers.get(kernel_initializer or bert_initializer())
        self.scale = 1.0 / self.head_size**0.5

    def _weight(self, name, shape):
        return self.add_weight(name=name, shape=shape, initializer=clone_initializer(self.kernel_initializer))

    def build(self, content_shape, *args, **kwargs):
        hidden = content_shape[-1]
        projection = (hidden, self.num_heads, self.head_size)
        self.query_kernel = self._weight("query", projection)
        self.key_kernel = self._weight("key", projection)
        self.value_kernel = self._weight("value", projection)
        self.position_kernel = self._weight("position", projection)
        self.output_kernel = self._weight("output", projection)
        per_head = (self.num_heads, self.head_size)
        self.content_bias = self._weight("content_bias", per_head)
        self.position_bias = self._weight("position_bias", per_head)
        self.segment_bias = self._weight("segment_bias", per_head)
        self.segment_embedding = self._weight("segment_embedding", (2,) + per_head)
        self.probability_dropout = keras.layers.Dropout(self.attention_dropout, dtype=self.dtype_policy)
        self.built = True

    def _attend(self, query_heads, keys, values, positions, segment_matrix, mask, training):
        """One stream's attention: query heads `[B, S, N, D]` -> mixed values `[B, S, N, D]`."""
        content = ops.einsum("bind,bjnd->bnij", query_heads + self.content_bias, keys)  # [B, N, S, K]
        position = ops.einsum("bind,bjnd->bnij", query_heads + self.position_bias, positions)  # [B, N, S, R]
        scores = content + relative_shift(position, ops.shape(keys)[1])  # [B, N, S, K]
        if segment_matrix is not None:
            per_segment = ops.einsum(
                "bind,snd->bnis", query_heads + self.segment_bias, self.segment_embedding
            )  # [B, N, S, 2]: same segment, different segment
            different = ops.cast(segment_matrix, scores.dtype)[:, None, :, :]  # [B, 1, S, K]
            scores = scores + per_segment[..., :1] + different * (per_segment[..., 1:] - per_segment[..., :1])
        # The softmax runs in float32 so that half-precision scores neither overflow nor lose the mask.
        scores = ops.cast(scores, "float32") * self.scale
        if mask is not None:
            scores = mask_logits(scores, mask[:, None, :, :])
        probabilities = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)  # [B, N, S, K]
        mixed = ops.einsum("bnij,bjnd->bind", self.probability_dropout(probabilities, training=training), values)
        return mixed, probabilities  # [B, S, N, D], [B, N, S, K]

    def call(
        self,
        content,
        position_encoding,
        content_mask=None,
        segment_matrix=None,
        memory=None,
        query=None,
        query_mask=None,
        target_mapping=None,
        return_attention_scores=False,
        training=None,
    ):
        context = content if memory is None else ops.concatenate([ops.cast(memory, content.dtype), content], axis=1)
        keys = ops.einsum("bjh,hnd->bjnd", context, self.key_kernel)  # [B, K, N, D]
        values = ops.einsum("bjh,hnd->bjnd", context, self.value_kernel)  # [B, K, N, D]
        positions = ops.einsum(
            "brh,hnd->brnd", ops.cast(position_encoding, content.dtype), self.position_kernel
        )  # [1 or B, R, N, D]
        positions = ops.broadcast_to(positions, (ops.shape(content)[0],) + tuple(ops.shape(positions)[1:]))

        content_heads = ops.einsum("bih,hnd->bind", content, self.query_kernel)  # [B, S, N, D]
        mixed, content_probabilities = self._attend(
            content_heads, keys, values, positions, segment_matrix, content_mask, training
        )
        content_out = ops.einsum("bind,hnd->bih", mixed, self.output_kernel)  # [B, S, H]

        query_out, query_probabilities = None, None
        if query is not None:
            query_heads = ops.einsum("bth,hnd->btnd", query, self.query_kernel)  # [B, T, N, D]
            if target_mapping is not None:
                # Each prediction's query sits at its position: the relative terms need it there.
                mapping = ops.cast(target_mapping, query_heads.dtype)
                query_heads = ops.einsum("btnd,bti->bind", query_heads, mapping)  # [B, S, N, D]
            mixed, query_probabilities = self._attend(
                query_heads, keys, values, positions, segment_matrix, query_mask, training
            )
            if target_mapping is not None:
                mixed = ops.einsum("bind,bti->btnd", mixed, mapping)  # [B, T, N, D]
            query_out = ops.einsum("btnd,hnd->bth", mixed, self.output_kernel)  # [B, T, H]

        outputs = (content_out,) if query is None else (content_out, query_out)
        if return_attention_scores:
            outputs += (content_probabilities,) if query is None else (content_probabilities, query_probabilities)
        return outputs if len(outputs) > 1 else content_out

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "head_size": self.head_size,
                "attention_dropout": self.attention_dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config

"""Disentangled attention (He et al. 2021, DeBERTa): content and relative position scored apart.

Each token's content vector attends to the others' content (content->content), to the relative
position of the key (content->position, c2p) and, through the key's content, to its position as
seen from the key (position->content, p2c); the three scores are added and scaled by
1/sqrt(3 D). Relative distances are log-bucketed beyond `position_buckets / 2` (DeBERTa-v2/v3),
and the position projections reuse the content ones (`share_att_key`, v3) or have their own.
"""

import math

import keras
from keras import ops

from bertlayers.layers.multi_head_attention import MultiHeadAttention

POSITION_TERMS = ("c2p", "p2c")


def log_bucket_positions(relative, buckets, max_position):
    """DeBERTa's bucketed distances: exact within `buckets // 2` of 0, then logarithmic up to
    `max_position`, sign kept (`relative`: int `[Q, K]`; computed in float32 as the reference is)."""
    relative = ops.cast(relative, "float32")
    middle = buckets // 2
    sign = ops.sign(relative)
    near = ops.logical_and(relative < middle, relative > -middle)
    magnitude = ops.where(near, float(middle - 1), ops.abs(relative))
    # Both logarithms in float32 and by the same kernel (a tensor of the same shape: a scalar's log
    # can differ from a vector's in the last bit), so that at |d| = max_position - 1 their ratio is
    # exactly 1, as in the reference; one bit more would tip the ceiling to the next bucket.
    scale = ops.log(ops.full_like(magnitude, (max_position - 1) / middle))
    logarithmic = ops.ceil(ops.log(magnitude / middle) / scale * (middle - 1)) + middle
    return ops.cast(ops.where(magnitude <= middle, relative, logarithmic * sign), "int32")


def relative_positions(query_length, key_length, buckets=0, max_position=0):
    """`[Q, K]` int32: query position minus key position, log-bucketed when both are positive."""
    relative = ops.expand_dims(ops.arange(query_length), 1) - ops.expand_dims(ops.arange(key_length), 0)
    if buckets > 0 and max_position > 0:
        return log_bucket_positions(relative, buckets, max_position)
    return ops.cast(relative, "int32")


@keras.saving.register_keras_serializable(package="bertlayers")
class DisentangledAttention(MultiHeadAttention):
    """Multi-head attention with DeBERTa's content->position and position->content terms.

    Args:
      num_heads, key_dim, dropout, use_bias, kernel_initializer: as `MultiHeadAttention`.
      max_relative_positions: the largest distance told apart (the checkpoints' setting; with
        buckets, the distance the logarithmic buckets reach).
      position_buckets: the relative-embedding table has `2 * position_buckets` rows (0: no
        buckets, `2 * max_relative_positions` rows, distances clipped).
      share_att_key: the position terms use the content query/key projections (DeBERTa-v3);
        otherwise their own `position_key` (c2p) and `position_query` (p2c) projections.
      position_terms: which of "c2p" and "p2c" are scored.

    Call args:
      query, value, attention_mask, return_attention_scores, training: as `MultiHeadAttention`
        (self-attention: the keys are the queries' rows, `value` the same sequence as the block
        passes it, or None for `query`).
      relative_embeddings: `[2 * span, hidden]`, the encoder's table of relative-position vectors
        (normalized there, shared by every layer); span is `position_buckets` or
        `max_relative_positions`. Rows beyond `2 * span` are not read. `[batch, 2 * span, hidden]`
        is read as one table (its first row): a functional model's inputs are batch-first.

    Returns:
      `[batch, query_len, hidden]` (and the probabilities `[batch, N, query_len, key_len]`).
    """

    # Its positions are relative, from the encoder's table: the block passes it none.
    position_arguments = frozenset()

    def __init__(
        self,
        num_heads: int,
        key_dim: int,
        max_relative_positions: int,
        position_buckets: int = 0,
        share_att_key: bool = True,
        position_terms: tuple = POSITION_TERMS,
        **kwargs,
    ) -> None:
        super().__init__(num_heads, key_dim, **kwargs)
        self.max_relative_positions = int(max_relative_positions)
        self.position_buckets = int(position_buckets)
        self.share_att_key = bool(share_att_key)
        self.position_terms = tuple(position_terms)
        unknown = set(self.position_terms) - set(POSITION_TERMS)
        if unknown or self.max_relative_positions < 1:
            raise ValueError(
                f"DisentangledAttention takes position_terms among {POSITION_TERMS} (got {self.position_terms}) "
                f"and max_relative_positions >= 1 (got {max_relative_positions})."
            )
        # The table's half-width: the buckets when there are any, else the distances.
        self.span = self.position_buckets if self.position_buckets > 0 else self.max_relative_positions

    def build(self, query_shape, value_shape=None, attention_mask_shape=None):
        super().build(query_shape)
        heads = (None, self.num_heads, self.key_dim)
        if not self.share_att_key:
            if "c2p" in self.position_terms:
                self.position_key_dense = self._projection("btd,dnh->btnh", heads, "nh", "position_key")
                self.position_key_dense.build(query_shape)
            if "p2c" in self.position_terms:
                self.position_query_dense = self._projection("btd,dnh->btnh", heads, "nh", "position_query")
                self.position_query_dense.build(query_shape)

    def call(
        self,
        query,
        value=None,
        attention_mask=None,
        relative_embeddings=None,
        return_attention_scores=False,
        training=None,
    ):
        if value is not None and value is not query and query.shape[1] != value.shape[1]:
            raise ValueError(
                "DisentangledAttention is self-attention: the keys are the queries' rows (query and value of one "
                f"length), got {query.shape[1]} queries and {value.shape[1]} keys."
            )
        value = query if value is None else value
        if relative_embeddings is None and self.position_terms:
            raise ValueError("DisentangledAttention needs the encoder's relative_embeddings [2 * span, hidden].")
        if relative_embeddings is not None and len(relative_embeddings.shape) == 3:
            relative_embeddings = relative_embeddings[0]  # [batch, 2S, H]: the same table in every row
        length = ops.shape(query)[1]
        factor = 1 + len(self.position_terms)
        scale = ops.cast(1.0 / math.sqrt(self.key_dim * factor), self.compute_dtype)
        queries = self.query_dense(query)  # [B, Q, N, D]
        keys = self.key_dense(value)  # [B, K, N, D]
        values = self.value_dense(value)
        scores = ops.einsum("bqnd,bknd->bnqk", queries * scale, keys)  # [B, N, Q, K]

        if self.position_terms:
            table = ops.expand_dims(relative_embeddings[: 2 * self.span], 0)  # [1, 2S, H]
            distance = relative_positions(length, length, self.position_buckets, self.max_relative_positions)
            if "c2p" in self.position_terms:
                position_keys = (self.key_dense if self.share_att_key else self.position_key_dense)(table)[0]
                by_distance = ops.einsum("bqnd,snd->bnqs", queries * scale, position_keys)  # [B, N, Q, 2S]
                index = ops.clip(distance + self.span, 0, 2 * self.span - 1)  # [Q, K]: q - k
                scores += ops.take_along_axis(by_distance, _broadcast_index(index, by_distance), axis=-1)
            if "p2c" in self.position_terms:
                position_queries = (self.query_dense if self.share_att_key else self.position_query_dense)(table)[0]
                by_distance = ops.einsum("bknd,snd->bnks", keys * scale, position_queries)  # [B, N, K, 2S]
                # Row k, column q reads the distance k - q as seen from the key: -(k - q) + span.
                index = ops.clip(-distance + self.span, 0, 2 * self.span - 1)  # [K, Q] (self-attention: K = Q)
                gathered = ops.take_along_axis(by_distance, _broadcast_index(index, by_distance), axis=-1)
                scores += ops.transpose(gathered, (0, 1, 3, 2))  # [B, N, Q, K]

        return self._softmax_attention(scores, values, attention_mask, return_attention_scores, training)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_relative_positions": self.max_relative_positions,
                "position_buckets": self.position_buckets,
                "share_att_key": self.share_att_key,
                "position_terms": list(self.position_terms),
            }
        )
        return config


def _broadcast_index(index, scores):
    """`index` `[rows, cols]` broadcast to `scores`' leading axes: `[B, N, rows, cols]`."""
    return ops.broadcast_to(index, tuple(ops.shape(scores)[:2]) + tuple(ops.shape(index)))

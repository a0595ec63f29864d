"""Who may attend to whom in XLNet: the two streams' masks and the segment matrix.

Dimensions: B batch, S sequence, M memory, K = M + S keys.

`perm_mask[b, i, j] = 1` means position i may not see position j (XLNet's convention, the
one transformers' `XLNetModel` takes): for a sampled factorization order, a prediction
target sees only what comes earlier in the order. Padding is never seen, the memory is
always seen. The query stream, which predicts token i, obeys exactly that; the content
stream, which carries token i itself, may also see itself.
"""

import keras
from keras import ops

from bertlayers.layers.input_checks import check_rank
from bertlayers.layers.masking import merge_attention_masks


@keras.saving.register_keras_serializable(package="bertlayers")
class TwoStreamMasks(keras.layers.Layer):
    """Attention masks (nonzero = may attend) and the segment matrix for relative attention.

    Call args:
      padding_mask: `[B, S]`, nonzero at real tokens.
      segment_ids: `[B, S]`.
      perm_mask: float or int `[B, S, S]`, 1 where i may not see j; None: no order.
      memory: `[B, M, ...]` or None (memory positions count as segment 0, as in XLNet).

    Returns:
      content_mask `[B, S, K]`, query_mask `[B, S, K]` (bool), segment_matrix `[B, S, K]`
      (int32, 1 where i and j lie in different segments).
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.built = True

    def call(self, padding_mask, segment_ids, perm_mask=None, memory=None):
        batch, length = ops.shape(padding_mask)[0], ops.shape(padding_mask)[1]
        if perm_mask is not None:
            check_rank(perm_mask, 3, "perm_mask", "[batch, seq, seq]")
            perm_mask = ops.equal(perm_mask, 0)  # XLNet's "may not see" to our "may see"
        visible = merge_attention_masks(padding_mask, perm_mask)
        query_mask = ops.broadcast_to(visible, (batch, length, length))  # [B, S, S]
        content_mask = ops.logical_or(query_mask, ops.eye(length, dtype="bool")[None])  # itself, always
        key_segments = segment_ids
        if memory is not None:
            memory_length = ops.shape(memory)[1]
            always = ops.ones((batch, length, memory_length), dtype="bool")
            query_mask = ops.concatenate([always, query_mask], axis=2)  # [B, S, K]
            content_mask = ops.concatenate([always, content_mask], axis=2)
            key_segments = ops.concatenate([ops.zeros((batch, memory_length), segment_ids.dtype), segment_ids], axis=1)
        segment_matrix = ops.cast(ops.not_equal(segment_ids[:, :, None], key_segments[:, None, :]), "int32")
        return content_mask, query_mask, segment_matrix  # [B, S, K] each

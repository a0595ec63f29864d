"""Sliding-window (local) attention computed band by band: cost and memory linear in the sequence
length times the window, never a `[seq, seq]` score matrix (ModernBERT's local layers at 8,192
tokens).

Query i attends key j where |i - j| <= h (h = window // 2). The sequence is cut into blocks of h
queries; block b's queries can only reach the keys of blocks b - 1, b and b + 1, so each block
scores 3h keys:

    queries  [B, S, N, D]  → blocks [B, S/h, h, N, D]
    keys     [B, S, N, D]  → for each block, its 3h neighbours [B, S/h, 3h, N, D]
    scores   [B, N, S/h, h, 3h]  masked to |i - j| <= h and to real keys, softmax in float32
    context  [B, S/h, h, N, D] → [B, S, N, D]
"""

from keras import ops

from bertlayers.layers.masking import mask_logits


def banded_attention(query, key, value, key_mask, window, dropout=None):
    """Softmax attention of every query over the keys within `window // 2` positions.

    Args:
      query: `[B, S, N, D]`, already scaled.
      key, value: `[B, S, N, D]` (self-attention: the same positions as the queries).
      key_mask: `[B, S]`, nonzero at keys that may be attended (real tokens), or None.
      window: the window's width in tokens (ModernBERT's `local_attention`).
      dropout: a function applied to the probabilities (attention dropout), or None.

    Returns:
      `[B, S, N, D]`: equal to dense attention under the band mask `local_attention_mask`.
    """
    half = max(window // 2, 1)
    batch, length = ops.shape(query)[0], ops.shape(query)[1]
    blocks = (length + half - 1) // half
    padded = blocks * half
    # Queries in blocks of `half` rows; keys padded by a block on each side (and to the block grid).
    grid = [[0, 0], [0, padded - length], [0, 0], [0, 0]]
    query = ops.reshape(ops.pad(query, grid), (batch, blocks, half, *query.shape[2:]))  # [B, nb, h, N, D]
    around = [[0, 0], [half, padded - length + half], [0, 0], [0, 0]]
    key, value = ops.pad(key, around), ops.pad(value, around)  # [B, S' + 2h, N, D]
    if key_mask is None:
        key_mask = ops.ones((batch, length), "bool")
    key_mask = ops.pad(ops.cast(key_mask, "bool"), [[0, 0], [half, padded - length + half]])  # [B, S' + 2h]

    def neighbours(x):  # [B, S' + 2h, ...] -> [B, nb, 3h, ...]: block b's keys b-1, b, b+1
        views = [
            ops.reshape(x[:, shift * half : shift * half + padded], (batch, blocks, half, *x.shape[2:]))
            for shift in range(3)
        ]
        return ops.concatenate(views, axis=2)

    key, value, key_mask = neighbours(key), neighbours(value), neighbours(key_mask)
    scores = ops.cast(ops.einsum("bxqnd,bxknd->bnxqk", query, key), "float32")  # [B, N, nb, h, 3h]
    # Query q of a block sits at block * h + q, key k of its neighbours at block * h - h + k.
    # (New axes by expand_dims / reshape: TFLite converts no strided slice adding one to a tensor
    # of unknown size.)
    offset = ops.expand_dims(ops.arange(half), 1) - ops.expand_dims(ops.arange(3 * half), 0) + half  # [h, 3h]: i - j
    band = ops.reshape(ops.abs(offset) <= window // 2, (1, 1, half, 3 * half))
    allowed = ops.logical_and(band, ops.expand_dims(key_mask, 2))  # [B, nb, h, 3h]
    scores = mask_logits(scores, ops.expand_dims(allowed, 1))
    probabilities = ops.cast(ops.softmax(scores, axis=-1), value.dtype)
    if dropout is not None:
        probabilities = dropout(probabilities)
    context = ops.einsum("bnxqk,bxknd->bxqnd", probabilities, value)  # [B, nb, h, N, D]
    return ops.reshape(context, (batch, padded, *context.shape[3:]))[:, :length]

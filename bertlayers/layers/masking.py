"""Attention masks and masked logits.

Every attention mask in the library is boolean with `True` where attention is allowed,
shaped `[batch, query, key]` or `[batch, 1, key]` (broadcast over queries).
"""

import keras
from keras import ops

from bertlayers.backend import TensorLike

# Masked logits must stay finite in every floating dtype: float16's max is 65504, so
# -1e9 would overflow to -inf there and turn a fully masked row into NaN.
_FLOAT16_LARGE_NEGATIVE = -3.0e4
_LARGE_NEGATIVE = -1.0e9


def large_negative_number(dtype):
    """A large negative value representable in `dtype` (finite, safe for softmax)."""
    if keras.backend.standardize_dtype(dtype) == "float16":
        return _FLOAT16_LARGE_NEGATIVE
    return _LARGE_NEGATIVE


def mask_logits(logits, mask):
    """`logits` where `mask` is true, a large negative value elsewhere."""
    fill = ops.cast(large_negative_number(logits.dtype), logits.dtype)
    return ops.where(ops.cast(mask, "bool"), logits, fill)


def merge_attention_masks(
    padding_mask: TensorLike | None = None, attention_mask: TensorLike | None = None
) -> TensorLike | None:
    """Combine a key padding mask and an explicit attention mask.

    Args:
      padding_mask: `[batch, key]`, nonzero at real tokens, or None.
      attention_mask: `[batch, query, key]`, nonzero where a query may attend a key, or None.

    Returns:
      Boolean `[batch, 1, key]`, `[batch, query, key]`, or None when both are None.
    """
    mask = None
    if padding_mask is not None:
        mask = ops.expand_dims(ops.cast(padding_mask, "bool"), axis=1)
    if attention_mask is not None:
        attention_mask = ops.cast(attention_mask, "bool")
        mask = attention_mask if mask is None else ops.logical_and(mask, attention_mask)
    return mask


def per_query_attention_mask(attention_mask: TensorLike, query_length: int) -> TensorLike:
    """`attention_mask` (`[B, 1 or Q, K]`, nonzero where a query may attend) as the boolean
    `[B, 1, Q, K]` that `ops.dot_product_attention` takes, spelled out for every query: cuDNN's
    fused kernel refuses a mask broadcast over the queries ("Bias must have same seq length as
    QKV"), and JAX then falls back to its XLA form with a logged traceback at every trace."""
    mask = ops.expand_dims(ops.not_equal(attention_mask, 0), 1)  # [B, 1, 1 or Q, K]
    if mask.shape[2] == 1:
        mask = ops.broadcast_to(mask, (ops.shape(mask)[0], 1, query_length, ops.shape(mask)[3]))
    return mask


def causal_attention_mask(inputs: TensorLike) -> TensorLike:
    """Lower-triangular mask `[batch, seq, seq]` for left-to-right attention.

    Args:
      inputs: any tensor shaped `[batch, seq, ...]`; only its shape is used.
    """
    batch_size, seq_length = ops.shape(inputs)[0], ops.shape(inputs)[1]
    positions = ops.arange(seq_length)
    mask = ops.expand_dims(positions, 1) >= ops.expand_dims(positions, 0)
    return ops.broadcast_to(ops.expand_dims(mask, 0), (batch_size, seq_length, seq_length))


def local_attention_mask(inputs, window):
    """Band mask `[batch, seq, seq]`: query i attends key j where |i - j| <= window // 2
    (sliding-window attention; ModernBERT's local layers with `local_attention` = window).

    Args:
      inputs: any tensor shaped `[batch, seq, ...]`; only its shape is used.
      window: the window's width in tokens (a positive integer).
    """
    batch_size, seq_length = ops.shape(inputs)[0], ops.shape(inputs)[1]
    positions = ops.arange(seq_length)
    mask = ops.abs(ops.expand_dims(positions, 1) - ops.expand_dims(positions, 0)) <= window // 2
    return ops.broadcast_to(ops.expand_dims(mask, 0), (batch_size, seq_length, seq_length))


def check_attention_window(window):
    """`window` as a positive integer (None: no window)."""
    if window is None:
        return None
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise ValueError(f"attention_window must be a positive integer or None, got {window!r}.")
    return window

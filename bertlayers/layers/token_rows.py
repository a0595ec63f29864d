"""Position-wise layers applied to a sequence seen as one matrix of token rows."""

from keras import ops


def on_token_rows(fn, x):
    """`fn` applied to `x` `[..., width]` reshaped to `[tokens, width]`, and the result
    `[tokens, width_out]` reshaped back to `[..., width_out]`.

    A position-wise feed-forward network computes the same either way. On rows, its dense
    layers are 2-D MatMuls, and TensorFlow's graph optimizer fuses a 2-D MatMul with its bias
    and activation (GELU included) into one oneDNN kernel; after a 3-D matmul they stay
    separate passes over the `[tokens, intermediate]` activations.
    """
    shape = ops.shape(x)
    rows = ops.reshape(x, (-1, shape[-1]))  # [tokens, width]
    out = fn(rows)  # [tokens, width_out]
    return ops.reshape(out, (*shape[:-1], out.shape[-1]))

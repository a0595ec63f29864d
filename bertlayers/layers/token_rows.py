"""Position-wise layers applied to a sequence seen as one matrix of token rows."""

from keras import ops

from bertlayers import backend


def on_token_rows(fn, x, padding_mask=None):
    """`fn` applied to `x` `[..., width]` reshaped to `[tokens, width]`, and the result
    `[tokens, width_out]` reshaped back to `[..., width_out]`.

    A position-wise feed-forward network computes the same either way. On rows, its dense
    layers are 2-D MatMuls, and TensorFlow's graph optimizer fuses a 2-D MatMul with its bias
    and activation (GELU included) into one oneDNN kernel; after a 3-D matmul they stay
    separate passes over the `[tokens, intermediate]` activations.

    With `padding_mask` (`x`'s shape without `width`, nonzero at real tokens), `fn` sees only
    the real tokens' rows and the padding rows of the result are zeros. A batch of real text is
    padded to its longest member: a batch of 32 review snippets is about half padding, and a
    position-wise network computes nothing there that any later step reads (attention masks
    padding keys out; heads read real tokens).

    Under JAX, whose compiled steps need static shapes, `fn` runs on every row and the padding
    rows are zeroed: the same result, without the saving. There the padding is cut before the
    model, by batching sequences of like length (`bertlayers.training.length_batches`), which
    also keeps the number of compiled shapes small.
    """
    shape = ops.shape(x)
    rows = ops.reshape(x, (-1, shape[-1]))  # [tokens, width]
    if padding_mask is None:
        out = fn(rows)  # [tokens, width_out]
    elif not backend.skips_padding_rows():
        out = fn(rows)  # [tokens, width_out]
        out = out * ops.cast(ops.not_equal(ops.reshape(padding_mask, (-1, 1)), 0), out.dtype)
    else:
        real = backend.nonzero_indices(ops.reshape(padding_mask, (-1,)))  # [real]
        out_real = fn(ops.take(rows, real, axis=0))  # [real, width_out]
        out = ops.scatter(ops.expand_dims(real, -1), out_real, (ops.shape(rows)[0], out_real.shape[-1]))
    return ops.reshape(out, (*shape[:-1], out.shape[-1]))

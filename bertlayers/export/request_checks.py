"""Checks on what a server feeds a signature, run in the graph before any model or tokenizer op.

A server does not check fed tensors against a signature's declared shapes (TF Serving feeds
`Session::Run` directly, and Python's loaded signatures fall back to a flat call), so a request
of the wrong rank, mismatched shapes or out-of-range ids reaches the graph. Unchecked, it fails
deep inside with a message that names nothing, reads wrong embedding rows, or (a scalar string
in tensorflow-text's normalizer) kills the process. Each check here fails the request with an
InvalidArgumentError that names the input, and the server keeps serving.

Grappler folds `Rank`, `Size` and `Shape` of tensors whose declared shape makes them static,
which would delete a check written with them; the quantities here are computed from the fed
tensor's runtime shape vector so that nothing about them is static.
"""

from bertlayers.layers.input_checks import LEFT_PADDING
from bertlayers.startup import require_tensorflow

tf = require_tensorflow(__name__)


def _runtime_rank(tensor):
    """The rank of the tensor actually fed: counts the shape vector's entries (all ≥ 0)."""
    return tf.reduce_sum(tf.cast(tf.shape(tensor) >= 0, tf.int32))


def _after(checks, tensors):
    with tf.control_dependencies(checks):
        return {name: tf.identity(t) for name, t in tensors.items()}


def checked_ranks(tensors, rank, layout):
    """Each of {name: tensor} must have `rank`; the returned tensors run after the checks."""
    checks = [
        tf.debugging.Assert(
            tf.equal(_runtime_rank(t), rank),
            [f"{name} must be {layout} (rank {rank}); got a tensor of shape", tf.shape(t)],
        )
        for name, t in tensors.items()
    ]
    return _after(checks, tensors)


def checked_same_shape(tensors):
    """Every tensor of {name: tensor} (ranks already checked equal) must have the first one's shape."""
    (first_name, first), *rest = tensors.items()
    checks = [
        tf.debugging.Assert(
            tf.reduce_all(tf.equal(tf.shape(t), tf.shape(first))),
            [f"{name} and {first_name} must have the same shape; got", tf.shape(t), tf.shape(first)],
        )
        for name, t in rest
    ]
    return _after(checks, tensors)


def checked_range(tensor, name, limit, what):
    """Every value of `tensor` must lie in [0, limit)."""
    low, high = tf.reduce_min(tensor), tf.reduce_max(tensor)
    check = tf.debugging.Assert(
        tf.logical_or(tf.equal(tf.size(tensor), 0), tf.logical_and(low >= 0, high < limit)),
        [f"{name} must hold values in [0, {limit}) ({what}); its min and max are", low, high],
    )
    return _after([check], {name: tensor})[name]


def checked_id_request(inputs, sequence_length, vocabulary_size, type_vocab_size, truncate, real_first=False):
    """Token ids, and segment ids and padding mask where the model takes them, as fed: rank 2,
    one shape, within range and length; with `real_first` (a model that reads its summary token at
    position 0), no row whose first position is padding (a left-padded request would be answered
    from a padding row: one answer for every text).

    Returns the checked tensors (cut to `sequence_length` when `truncate`).
    """
    inputs = checked_ranks(inputs, 2, "[batch, sequence_length]")
    inputs = checked_same_shape(inputs)
    if truncate:
        inputs = {name: t[:, :sequence_length] for name, t in inputs.items()}
    else:
        # Not tf.shape(...)[1]: Grappler folds a declared dimension into a constant.
        token_ids = inputs["token_ids"]
        length = tf.size(token_ids) // tf.maximum(tf.shape(token_ids)[0], 1)
        check = tf.debugging.Assert(
            length <= sequence_length,
            [
                f"token_ids is longer than the exported sequence_length {sequence_length}; "
                "shorten the request, or export with truncation on. Its length is",
                length,
            ],
        )
        inputs = _after([check], inputs)
    limits = {
        "token_ids": (vocabulary_size, "the vocabulary size"),
        "segment_ids": (type_vocab_size, "type_vocab_size"),
        "padding_mask": (2, "1 at real tokens, 0 at padding"),
    }
    # Without segment embeddings (DistilBERT, ModernBERT, EuroBERT) segment ids are read by no one.
    inputs = {
        name: t if name == "segment_ids" and not type_vocab_size else checked_range(t, name, *limits[name])
        for name, t in inputs.items()
    }
    if "padding_mask" in inputs:
        inputs["padding_mask"] = checked_rows_have_tokens(inputs["padding_mask"])
        if real_first:
            mask = inputs["padding_mask"]
            check = tf.debugging.Assert(
                tf.logical_or(tf.equal(tf.size(mask), 0), tf.reduce_all(tf.equal(mask[:, :1], 1))),
                [
                    LEFT_PADDING.format(name="padding_mask", row="of this request") + " First position per row:",
                    mask[:, :1],
                ],
            )
            inputs = _after([check], inputs)
    return inputs


def checked_rows_have_tokens(padding_mask):
    """Every row of the 0/1 `padding_mask` must hold a real token (a `[batch, 0]` request holds none)."""
    length = tf.size(padding_mask) // tf.maximum(tf.shape(padding_mask)[0], 1)
    check = tf.debugging.Assert(
        tf.logical_or(
            tf.equal(tf.shape(padding_mask)[0], 0),
            tf.logical_and(length > 0, tf.reduce_all(tf.reduce_max(padding_mask, axis=1) > 0)),
        ),
        [
            "every sequence needs at least one real token (padding_mask 1, token id not [PAD]); real tokens per row:",
            tf.reduce_sum(padding_mask, axis=1),
        ],
    )
    return _after([check], {"padding_mask": padding_mask})["padding_mask"]


def checked_text_request(texts):
    """Strings as fed, {name: tensor}: each a batch `[batch]`, all of one batch size."""
    return checked_same_shape(checked_ranks(texts, 1, "a batch of strings [batch]"))

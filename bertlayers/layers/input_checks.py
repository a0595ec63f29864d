"""Checks that turn bad inputs into clear errors at the layer boundary, not deep in a graph.

Values known when the layer is called (NumPy, eager tensors, concrete JAX arrays) are checked
at once. A TensorFlow graph gets assertions that run with it. Inside a JAX trace (`jax.jit`,
every `fit` step) values are unknown and JAX has no in-graph assertion short of `checkify`,
which would rewrite every step: there only shapes are checked, and an id past the table reads
as NaN (JAX's gathers fill out-of-range rows), so call the model once eagerly on suspect data.
"""

from typing import NamedTuple

import keras
import numpy as np

from bertlayers import backend


def check_integer_ids(tensor, name):
    """Raise a TypeError naming `name` unless `tensor` holds integers."""
    dtype = keras.backend.standardize_dtype(tensor.dtype)
    if "int" not in dtype:
        raise TypeError(f"{name} must be an integer tensor (int32), got dtype {dtype}.")


def check_rank(tensor, rank, name, layout):
    if len(tensor.shape) != rank:
        raise ValueError(f"{name} must have rank {rank} ({layout}), got shape {tuple(tensor.shape)}.")


def check_same_shape(tensors):
    """Check that the tensors of a {name: tensor} dict agree in shape; returns the dict.

    Known dimensions are compared now; unknown ones (a graph traced with `[batch, None]`)
    get an assertion, instead of a broadcasting error deep in the graph.
    """
    named = [(name, t) for name, t in tensors.items() if t is not None and hasattr(t, "shape")]
    if not named:
        return tensors
    first_name, first = named[0]
    checked = dict(tensors)
    first_shape = tuple(first.shape)
    for name, tensor in named[1:]:
        shape = tuple(tensor.shape)
        if shape == first_shape and None not in shape:
            continue  # the common case, checked without more work (every predictor call takes this path)
        message = f"{name} and {first_name} must have the same shape [batch, seq]"
        if len(shape) != len(first_shape) or any(
            a is not None and b is not None and a != b for a, b in zip(shape, first_shape)
        ):
            raise ValueError(f"{message}; got {shape} and {first_shape}.")
        tf = backend.graph_assertions()
        if (
            None in shape + first_shape
            and tf
            and not tf.executing_eagerly()
            and not isinstance(tensor, keras.KerasTensor)
        ):
            check = tf.debugging.Assert(
                tf.reduce_all(tf.equal(tf.shape(tensor), tf.shape(first))),
                [message + "; got", tf.shape(tensor), tf.shape(first)],
            )
            with tf.control_dependencies([check]):
                checked[name] = tf.identity(tensor)
    return checked


def check_id_range(ids, limit, name, what):
    """Reject ids outside [0, limit) with a message naming `name`, the bad value and the limit.

    A gather reads the last row for a negative id, fails deep in the graph past the end on a
    CPU, and returns zeros on a GPU: none of them says what was wrong. Concrete values are
    checked here; symbolic ones get an assertion in the graph (on data, so never folded away).
    """
    if isinstance(ids, keras.KerasTensor):
        return ids
    values = backend.known_values(ids)
    if values is not None:
        if values.size:
            low, high = values.min(), values.max()
            if low < 0 or high >= limit:
                raise ValueError(f"{name} holds {low if low < 0 else high}, outside [0, {limit}) ({what}).")
        return ids
    tf = backend.graph_assertions()
    if tf is None:
        return ids
    low, high = tf.reduce_min(ids), tf.reduce_max(ids)
    check = tf.debugging.Assert(
        tf.logical_or(tf.equal(tf.size(ids), 0), tf.logical_and(low >= 0, high < limit)),
        [f"{name} holds values outside [0, {limit}) ({what}); its min and max are", low, high],
    )
    with tf.control_dependencies([check]):
        return tf.identity(ids)


def check_sequence_length(tensor, max_length, name, axis=1):
    """Reject sequences longer than `max_length` (axis `axis` of `tensor`).

    A static length is checked when the layer is called; an unknown one (a graph traced
    with `[batch, None]` inputs) gets an assertion in the graph, whose message names the
    limit instead of an out-of-range gather deep inside the position embedding.
    """
    length = tensor.shape[axis]
    if length is not None:
        if length > max_length:
            raise ValueError(
                f"{name} has sequence length {length}, longer than the maximum "
                f"{max_length} this model supports (max_sequence_length)."
            )
        return tensor
    tf = backend.graph_assertions()
    if tf is None:
        return tensor
    check = tf.debugging.assert_less_equal(
        tf.shape(tensor)[axis],
        max_length,
        message=f"{name} is longer than the maximum sequence length {max_length}",
    )
    with tf.control_dependencies([check]):
        return tf.identity(tensor)


LEFT_PADDING = (
    "{name} row {row} starts with padding (left padding): this model reads its summary at position 0 "
    "([CLS]) and its positions from the first column, so pad on the right (1s first, then 0s)."
)


def check_padding_mask(mask, name="padding_mask", real_first=False):
    """Reject a padding mask that is not 0/1 (boolean passes), has a row with no real token, or has
    no positions at all; with `real_first`, also a row whose first position is padding.

    A mask of 2s or 255s attends like 1s but scales the rows that later steps read (the pooled
    [CLS] row among them); a row with no real token has nothing to attend to and returns
    zeros; a `[batch, 0]` input has no [CLS] row. A left-padded row (`[0, 1, 1]`) given to a
    model that reads its summary at position 0 ([CLS], `real_first`) pools a padding row: zeros,
    for any text. None of these fails by itself, so each is named here: concrete values now,
    symbolic ones by an assertion in the graph. Masks of any rank are checked along their last axis.
    """
    if mask is None or isinstance(mask, keras.KerasTensor):
        if mask is not None and mask.shape[1] == 0:
            raise ValueError(f"{name} has sequence length 0: every sequence needs at least one token.")
        return mask
    if len(mask.shape) == 2 and mask.shape[1] == 0:
        raise ValueError(f"{name} has sequence length 0: every sequence needs at least one token.")
    values = backend.known_values(mask)
    if values is not None:
        # Reductions first, the offending value or row looked for only when there is one: these
        # run before every predictor call, at a few microseconds each.
        if values.dtype != bool and values.size and (values.min() < 0 or values.max() > 1):
            other = (values != 0) & (values != 1)
            raise ValueError(f"{name} holds {values[other].flat[0]}: it must be 1 at real tokens and 0 at padding.")
        if values.ndim >= 2 and values.size:
            rows = values.reshape(-1, values.shape[-1])
            # 0/1 values: a first column of 1s (`real_first`) also means every row has a real token.
            if not (rows[:, 0].all() if real_first else rows.any(axis=1).all()):
                empty = np.flatnonzero(~rows.any(axis=1))
                if empty.size:
                    raise ValueError(
                        f"{name} row {empty[0]} has no real token (all 0): every sequence needs at least one."
                    )
                raise ValueError(LEFT_PADDING.format(name=name, row=np.flatnonzero(rows[:, 0] == 0)[0]))
        return mask
    tf = backend.graph_assertions()
    if tf is None:
        return mask
    values = tf.cast(mask, tf.int32)
    checks = [
        tf.debugging.Assert(
            tf.reduce_all(tf.logical_or(tf.equal(values, 0), tf.equal(values, 1))),
            [
                f"{name} must be 1 at real tokens and 0 at padding; its min and max are",
                tf.reduce_min(values),
                tf.reduce_max(values),
            ],
        ),
        tf.debugging.Assert(
            tf.logical_and(tf.shape(values)[1] > 0, tf.reduce_all(tf.reduce_max(values, axis=1) > 0)),
            [
                f"{name} has a row with no real token (all 0), or no positions; every sequence needs at least one. "
                "Real tokens per row:",
                tf.reduce_sum(values, axis=1),
            ],
        ),
    ]
    if real_first:
        checks.append(
            tf.debugging.Assert(
                tf.reduce_all(tf.equal(values[:, 0], 1)),
                [LEFT_PADDING.format(name=name, row="of this batch") + " First position per row:", values[:, 0]],
            )
        )
    with tf.control_dependencies(checks):
        return tf.identity(mask)


class EncoderInputLimits(NamedTuple):
    """What the inputs an encoder reads (named `prefix + token_ids`, `segment_ids`, `padding_mask`)
    may hold: ids below `vocabulary_size`, segments below `type_vocab_size` (None: unread), at
    most `max_sequence_length` positions, a 0/1 mask with a real token in every row (at position
    0 with `real_first`)."""

    vocabulary_size: int
    type_vocab_size: int | None
    max_sequence_length: int
    real_first: bool
    prefix: str = ""


def values_within(inputs, limits):
    """Whether `inputs` ({name: tensor}, inside a compiled function) hold only values that
    `check_encoder_values` accepts under each of `limits` (`EncoderInputLimits`): a scalar bool
    tensor, for a compiled predictor to return beside its outputs so that the host looks at the
    values (to name what is wrong) only when it is False. Shapes are not looked at (a compiled
    function's are static: checked once on the host per shape); an empty input passes."""
    ok = keras.ops.convert_to_tensor(True)
    for limit in limits:
        for name, high in (("token_ids", limit.vocabulary_size), ("segment_ids", limit.type_vocab_size)):
            ids = inputs.get(limit.prefix + name)
            if ids is not None and high and 0 not in ids.shape:
                ok = ok & (keras.ops.min(ids) >= 0) & (keras.ops.max(ids) < high)
        mask = inputs.get(limit.prefix + "padding_mask")
        if mask is not None and 0 not in mask.shape:
            mask = keras.ops.cast(mask, "int32")
            # 0/1 values; a real token in every row (a first column of 1s, with `real_first`).
            real = keras.ops.min(mask[..., 0] if limit.real_first else keras.ops.max(mask, axis=-1)) >= 1
            ok = ok & (keras.ops.min(mask) >= 0) & (keras.ops.max(mask) <= 1) & real
    return ok


def check_encoder_values(inputs, vocabulary_size, type_vocab_size, max_sequence_length, real_first, prefix=""):
    """Check concrete encoder inputs on the host: `{prefix + name: NumPy array}` for the names
    `token_ids`, `segment_ids` and `padding_mask` (any rank, the sequence on the last axis).

    What the encoder's call checks eagerly, done before a compiled step (`fit`, `predict`), where
    values cannot be checked: there a JAX gather reads id -1 as the last row and an id past the
    table as NaN, a TensorFlow graph under XLA drops its assertions.
    """
    ids = {
        prefix + name: inputs[prefix + name]
        for name in ("token_ids", "segment_ids", "padding_mask")
        if inputs.get(prefix + name) is not None
    }
    if not ids:
        return
    check_same_shape(ids)
    check_sequence_length(next(iter(ids.values())), max_sequence_length, next(iter(ids)), axis=-1)
    if prefix + "token_ids" in ids:
        check_id_range(ids[prefix + "token_ids"], vocabulary_size, prefix + "token_ids", "the vocabulary size")
    if prefix + "segment_ids" in ids and type_vocab_size:  # without segment embeddings (DistilBERT) they are unread
        check_id_range(ids[prefix + "segment_ids"], type_vocab_size, prefix + "segment_ids", "type_vocab_size")
    if prefix + "padding_mask" in ids:
        check_padding_mask(ids[prefix + "padding_mask"], prefix + "padding_mask", real_first=real_first)

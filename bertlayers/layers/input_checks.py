"""Checks that turn bad inputs into clear errors at the layer boundary, not deep in a graph."""

import keras
import tensorflow as tf


def check_integer_ids(tensor, name):
    """Raise a TypeError naming `name` unless `tensor` holds integers."""
    dtype = keras.backend.standardize_dtype(tensor.dtype)
    if "int" not in dtype:
        raise TypeError(f"{name} must be an integer tensor (int32), got dtype {dtype}.")


def check_rank(tensor, rank, name, layout):
    if len(tensor.shape) != rank:
        raise ValueError(
            f"{name} must have rank {rank} ({layout}), got shape {tuple(tensor.shape)}."
        )


def check_sequence_length(tensor, max_length, name):
    """Reject sequences longer than `max_length` (axis 1 of `tensor`).

    A static length is checked when the layer is called; an unknown one (a graph traced
    with `[batch, None]` inputs) gets an assertion in the graph, whose message names the
    limit instead of an out-of-range gather deep inside the position embedding.
    """
    length = tensor.shape[1]
    if length is not None:
        if length > max_length:
            raise ValueError(
                f"{name} has sequence length {length}, longer than the maximum "
                f"{max_length} this model supports (max_sequence_length)."
            )
        return tensor
    if keras.backend.backend() != "tensorflow":
        return tensor
    check = tf.debugging.assert_less_equal(
        tf.shape(tensor)[1],
        max_length,
        message=f"{name} is longer than the maximum sequence length {max_length}",
    )
    with tf.control_dependencies([check]):
        return tf.identity(tensor)

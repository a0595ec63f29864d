"""How long a batch is padded: one rule for training, prediction and the served graphs."""

from bertlayers.startup import require_tensorflow

tf = require_tensorflow(__name__)


def padded_length(longest, sequence_length, multiple=1):
    """The length a batch is padded to: its `longest` row (rounded up to a multiple of
    `multiple`), at least 1 and at most `sequence_length` (a scalar tensor).

    Under TensorFlow, training, prediction and the served graphs all cut to the exact longest:
    they are traced for any length (`[batch, None]`), so rounding up only adds work (on the
    benchmark's fine-tuning snippets, 12.5% more tokens at multiples of 8; served batches of
    real text were slower there: benchmarks/README.md). JAX compiles a step per shape, so
    there batches are rounded up (`bertlayers.backend.length_multiple`)."""
    rounded = (longest + multiple - 1) // multiple * multiple
    return tf.minimum(tf.maximum(rounded, multiple), sequence_length)

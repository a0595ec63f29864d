"""Length-aware batches: each batch cut to the longest real sequence in it.

Real text is short: Rotten Tomatoes snippets average about 30 WordPiece tokens, so a batch padded
to a fixed 64 spends half its attention and feed-forward work on padding. Here every batch is
trimmed to its longest example (the `tf.function` that Keras traces with `reduce_retracing`
settles on one `[batch, None]` signature, so new lengths do not retrace; rounding lengths up to
multiples of 8 only added work: benchmarks/README.md). Under JAX, which compiles a step for every
shape, lengths are rounded up to multiples of 16 (`backend.length_multiple`): a few shapes.

Training batches are random, as fixed-length batches are, and each is cut to its longest: what
Hugging Face's padding collator gives by default. Grouping them by length is optional, the way
Hugging Face's `group_by_length` does it: shuffle all examples, cut the stream into groups of
`group_size` batches, sort each group by length, batch, and shuffle the batches. Batches stay
random in order and in which examples meet, but their members have similar lengths, so there is
less padding left to cut. All of it runs in the tf.data graph, with no Python per step.

Dimension legend: B = batch, S = the arrays' full sequence length, L = a batch's trimmed length.
"""

import logging
import math

import keras
import numpy as np

from bertlayers import backend
from bertlayers.models.predictor import compiled_predictor
from bertlayers.startup import require_tensorflow
from bertlayers.tokenizers.padding import padded_length
from bertlayers.training.distribute import gathers_across_workers
from bertlayers.training.sharding import devices_per_batch
from bertlayers.utils.cli import plain_progress

logger = logging.getLogger(__name__)

tf = require_tensorflow(__name__)

# Batches per sorted group. Larger groups pad less but make consecutive batches more alike.
GROUP_SIZE = 50


def sequence_lengths(x):
    """Real tokens per example, from `x["padding_mask"]`: int `[B]`."""
    return np.asarray(x["padding_mask"]).sum(axis=1)


def per_token_outputs(model):
    """Names of the model's outputs with a sequence axis (`[B, None, ...]`): the labels and sample
    weights of those outputs are cut with the inputs; the others (`[B]`, `[B, classes]`) are not."""
    outputs = model.output if isinstance(model.output, dict) else {model.output_names[0]: model.output}
    return {name for name, tensor in outputs.items() if len(tensor.shape) >= 2 and tensor.shape[1] is None}


def _trim_batch(x, y, sample_weight, token_outputs):
    # [B, S] -> [B, L]: the columns holding any real token (padding on the right, or on the
    # left as XLNet's layout puts it).
    full = x["padding_mask"].shape[1]
    real = tf.reduce_any(tf.not_equal(x["padding_mask"], 0), axis=0)  # [S]
    first = tf.argmax(tf.cast(real, tf.int32), output_type=tf.int32)
    end = full - tf.argmax(tf.cast(real[::-1], tf.int32), output_type=tf.int32)
    length = padded_length(end - first, full, backend.length_multiple())
    first = tf.minimum(first, full - length)

    def cut(t):
        return t[:, first : first + length] if t.shape.rank >= 2 and t.shape[1] == full else t

    # Labels of a per-token output are cut only when they are per token too: SQuAD's are
    # positions, `[B]`, and stay inside the cut (an answer lies within the real tokens).
    x = {name: cut(t) for name, t in x.items()}
    y = {name: cut(t) if name in token_outputs else t for name, t in y.items()}
    sample_weight = {name: cut(t) if name in token_outputs else t for name, t in sample_weight.items()}
    return x, y, sample_weight


def _sort_group(x, y, sample_weight):
    # One group of G examples, reordered by real length.
    order = tf.argsort(tf.reduce_sum(tf.cast(x["padding_mask"], tf.int32), axis=1))
    return tf.nest.map_structure(lambda t: tf.gather(t, order), (x, y, sample_weight))


def length_batches(
    x: dict,
    y: np.ndarray | dict | None = None,
    sample_weight: np.ndarray | dict | None = None,
    *,
    batch_size: int,
    token_outputs: tuple[str, ...] = (),
    shuffle: bool = False,
    group_by_length: bool = False,
    seed: int | None = None,
    group_size: int = GROUP_SIZE,
    examples_multiple: int = 1,
    cut: bool = True,
) -> tf.data.Dataset:
    """A `tf.data.Dataset` of `(x, y, sample_weight)` batches, each cut to its longest example.

    Args:
      x: dict of `[N, S]` arrays with a `padding_mask` (what `ModelTokenizer.packer` gives); any arrays
        with `cut=False`.
      y, sample_weight: optional dicts keyed by output name, `[N, ...]` arrays.
      batch_size: examples per batch (global, as for `fit`).
      token_outputs: output names whose labels and weights have the sequence axis
        (`per_token_outputs(model)`): cut with the inputs.
      shuffle: training order. True: examples reshuffled every epoch into random batches.
        False: sorted by length once, the least padding possible (evaluation; the metrics do
        not depend on order).
      group_by_length: with `shuffle`, batches of similar lengths (sorted within groups of
        `group_size` batches): less padding, but which examples meet depends on their lengths.
      seed: shuffle seed.
      examples_multiple: each pass takes the largest multiple of this many of the N examples,
        leaving out the rest (random ones with `shuffle`, else the longest): across processes
        every device takes an equal share of every batch, the last one included
        (`sharding.devices_per_batch`).
      cut: False keeps the arrays' full length `S` (fixed-length batches, in the same order).

    The dataset knows its length (`ceil(N / batch_size)` batches, of the examples taken), so
    `fit` shows a progress bar and the learning-rate schedule's step count matches.
    """
    y, sample_weight = dict(y or {}), dict(sample_weight or {})
    token_outputs = frozenset(token_outputs)
    count = len(tf.nest.flatten(x)[0])
    used = count - count % examples_multiple
    if not used:
        raise ValueError(f"{count} examples cannot be shared equally by {examples_multiple} devices.")
    if used < count:
        logger.warning(
            f"Every pass leaves out {count - used} of {count} examples "
            f"({'random ones' if shuffle else 'the longest' if cut else 'the last'}): {examples_multiple} devices share every batch equally."
        )
    num_batches = math.ceil(used / batch_size)
    if not shuffle and cut:
        order = np.argsort(sequence_lengths(x), kind="stable")
        x, y, sample_weight = tf.nest.map_structure(lambda a: np.asarray(a)[order], (x, y, sample_weight))
    dataset = tf.data.Dataset.from_tensor_slices((x, y, sample_weight))
    grouped = shuffle and group_by_length
    if shuffle:
        dataset = dataset.shuffle(count, seed=seed, reshuffle_each_iteration=True)
    if used < count:
        dataset = dataset.take(used)
    if grouped:
        dataset = dataset.batch(batch_size * group_size).map(_sort_group).unbatch()
    dataset = dataset.batch(batch_size)
    if cut:
        dataset = dataset.map(lambda *batch: _trim_batch(*batch, token_outputs), num_parallel_calls=tf.data.AUTOTUNE)
    if grouped:
        # A whole group's batches in the buffer: their order within the group stops tracking length.
        dataset = dataset.shuffle(group_size, seed=None if seed is None else seed + 1, reshuffle_each_iteration=True)
    if not sample_weight:
        # Keras reads a second or third element as labels / weights: leave out what is not there.
        dataset = dataset.map(lambda x, y, sample_weight: (x, y) if y else x)
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(num_batches))
    return dataset.prefetch(tf.data.AUTOTUNE)


def predict_by_length(
    model: keras.Model, x: dict, batch_size: int = 32, verbose: str | int = "auto"
) -> np.ndarray | dict:
    """`model.predict(x)` with the examples sorted by length and each batch cut to its longest.

    Returns the same dict of numpy arrays, in the original order, with per-token outputs
    padded back to the inputs' full length `S` (zeros past each batch's cut). Inputs with more
    axes (`[N, choices, S]`) are sorted by their real tokens but not cut. Across JAX processes
    every process passes the same `x` and gets every row's outputs; each computes its share of
    every batch. Under TensorFlow's multi-worker strategy each worker computes every row.
    """
    mask = np.asarray(x["padding_mask"])
    order = np.argsort(mask.reshape(len(mask), -1).sum(axis=1), kind="stable")
    cuts, full = mask.ndim == 2, mask.shape[1]
    token_outputs = per_token_outputs(model) if cuts else ()
    predict = model.predict_on_batch
    if backend.process_index_and_count()[1] > 1 or gathers_across_workers(model):
        predict = _predictor_of(model)
    progress = keras.utils.Progbar(len(order), verbose=plain_progress(verbose)) if verbose else None
    results = {}
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        batch = {name: np.asarray(value)[rows] for name, value in x.items()}
        first = 0
        if cuts:
            # The columns holding any real token (right or left padding).
            columns = np.flatnonzero(batch["padding_mask"].any(axis=0))
            first, end = (int(columns[0]), int(columns[-1]) + 1) if len(columns) else (0, 1)
            length = int(padded_length(end - first, full, backend.length_multiple()))
            first = min(first, full - length)
            batch = {
                name: value[:, first : first + length] if value.ndim >= 2 and value.shape[1] == full else value
                for name, value in batch.items()
            }
        outputs = predict(batch)
        outputs = outputs if isinstance(outputs, dict) else {model.output_names[0]: outputs}
        for name, value in outputs.items():
            value = np.asarray(value)
            if name in token_outputs:
                # [b, L, ...] -> [b, S, ...], back in the columns it came from
                value = np.pad(value, [(0, 0), (first, full - first - value.shape[1])] + [(0, 0)] * (value.ndim - 2))
            if name not in results:
                results[name] = np.zeros((len(order),) + value.shape[1:], value.dtype)
            results[name][rows] = value
        if progress:
            progress.add(len(rows))
    return results


def _predictor_of(model):
    """`predict(batch)` for a model `predict_on_batch` cannot serve. Under TensorFlow's
    multi-worker strategy: the model called (`compiled_predictor`), each worker computing every
    row. Across JAX processes, for a batch every process holds whole: the batch padded to a
    multiple of all the devices (copies of its last row), this process's contiguous share of it
    computed by the compiled forward pass over every process's devices, and every row's outputs
    gathered back, in every process."""
    # One predictor a model, kept on it: a runner predicts with one model several times (dev
    # scores, evaluation, each ensemble member), each shape compiling once. The predictor holds
    # the model, so a table keyed by the model (even weakly) would keep every model alive; an
    # attribute is a cycle the collector frees with the model.
    if getattr(model, "_bertlayers_predictor", None) is not None:
        return model._bertlayers_predictor
    predict = compiled_predictor(model)
    index, count = backend.process_index_and_count()
    devices = devices_per_batch()

    def shared(batch):
        rows = len(next(iter(batch.values())))
        share = -(-rows // devices) * devices // count
        mine = np.minimum(np.arange(index * share, (index + 1) * share), rows - 1)
        outputs = predict({name: value[mine] for name, value in batch.items()})
        return keras.tree.map_structure(lambda value: value[:rows], outputs)

    model._bertlayers_predictor = shared if count > 1 else predict
    return model._bertlayers_predictor

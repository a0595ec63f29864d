"""Pretraining TFRecords with google-research/bert's feature names and dtypes.

Every record is a `tf.train.Example` with
  input_ids, input_mask, segment_ids        int64 [sequence_length]
  masked_lm_positions, masked_lm_ids        int64 [max_predictions_per_seq]
  masked_lm_weights                         float [max_predictions_per_seq]
  next_sentence_labels                      int64 [1]
so a file made for the original BERT trains here unchanged, and the reverse.

A family whose objective needs more per-record data (SpanBERT's span boundaries) names extra
int64 features with their lengths (`extra_features`, {name: length}); the original features
keep their names and meaning, so such records still train every other recipe.
"""

import os

import numpy as np

from bertlayers.startup import require_tensorflow

tf = require_tensorflow(__name__)

INT_FEATURES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "next_sentence_labels",
)
FLOAT_FEATURES = ("masked_lm_weights",)


def feature_lengths(sequence_length, max_predictions_per_seq, extra_features=None):
    return {
        "input_ids": sequence_length,
        "input_mask": sequence_length,
        "segment_ids": sequence_length,
        "masked_lm_positions": max_predictions_per_seq,
        "masked_lm_ids": max_predictions_per_seq,
        "masked_lm_weights": max_predictions_per_seq,
        "next_sentence_labels": 1,
        **(extra_features or {}),
    }


def feature_spec(sequence_length, max_predictions_per_seq, extra_features=None):
    """The `tf.io.parse_example` spec of a record."""
    return {
        name: tf.io.FixedLenFeature([length], tf.float32 if name in FLOAT_FEATURES else tf.int64)
        for name, length in feature_lengths(sequence_length, max_predictions_per_seq, extra_features).items()
    }


def _padded(values, length, dtype):
    array = np.zeros((length,), dtype)
    array[: len(values)] = values
    return array


def serialize_example(
    token_ids,
    segment_ids,
    positions,
    labels,
    next_sentence_label,
    sequence_length,
    max_predictions_per_seq,
    extra=None,
    extra_features=None,
):
    """One record, padded to the fixed lengths; `extra` holds {name: int list} for the
    `extra_features` ({name: length})."""
    if len(token_ids) > sequence_length:
        raise ValueError(f"An example of {len(token_ids)} tokens exceeds sequence_length {sequence_length}.")
    if len(positions) > max_predictions_per_seq:
        raise ValueError(f"{len(positions)} predictions exceed max_predictions_per_seq {max_predictions_per_seq}.")
    values = {
        "input_ids": _padded(token_ids, sequence_length, np.int64),
        "input_mask": _padded([1] * len(token_ids), sequence_length, np.int64),
        "segment_ids": _padded(segment_ids, sequence_length, np.int64),
        "masked_lm_positions": _padded(positions, max_predictions_per_seq, np.int64),
        "masked_lm_ids": _padded(labels, max_predictions_per_seq, np.int64),
        "masked_lm_weights": _padded([1.0] * len(positions), max_predictions_per_seq, np.float32),
        "next_sentence_labels": np.array([next_sentence_label], np.int64),
    }
    for name, length in (extra_features or {}).items():
        if len(extra[name]) > length:
            raise ValueError(f"Feature {name} has {len(extra[name])} values, more than its length {length}.")
        values[name] = _padded(extra[name], length, np.int64)
    feature = {
        name: (
            tf.train.Feature(float_list=tf.train.FloatList(value=value))
            if name in FLOAT_FEATURES
            else tf.train.Feature(int64_list=tf.train.Int64List(value=value))
        )
        for name, value in values.items()
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def check_tfrecords(
    files, sequence_length, max_predictions_per_seq, vocabulary_size=None, type_vocab_size=2, extra_features=None
):
    """Read every record of every file; raise a ValueError naming the file and the problem.

    Catches what would otherwise fail deep inside training: missing or extra features, wrong
    dtypes or lengths (a file made for another sequence_length), corrupt or truncated files, and
    ids out of range (records made with another vocabulary: `vocabulary_size`).

    Returns:
      The number of records per file.
    """
    if not files:
        raise ValueError("No pretraining TFRecord files were given.")
    expected = feature_lengths(sequence_length, max_predictions_per_seq, extra_features)
    counts = {}
    for path in files:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"No TFRecord file at {path}.")
        try:
            first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        except tf.errors.DataLossError as error:
            raise ValueError(f"{path} is corrupt after 0 records: {error.message}") from None
        if first is None:
            raise ValueError(f"{path} holds no records.")
        _check_first_record(path, first.numpy(), expected)
        counts[path] = _count_and_check_ranges(
            path, sequence_length, max_predictions_per_seq, vocabulary_size, type_vocab_size, extra_features
        )
    return counts


def _count_and_check_ranges(
    path, sequence_length, max_predictions_per_seq, vocabulary_size, type_vocab_size, extra_features
):
    """One pass over a file (its first record already checked): the record count, and every
    id, segment, position and mask value within its range."""
    limits = {
        "input_ids": (vocabulary_size, "the vocabulary size"),
        "masked_lm_ids": (vocabulary_size, "the vocabulary size"),
        "segment_ids": (type_vocab_size, "type_vocab_size"),
        "masked_lm_positions": (sequence_length, "sequence_length"),
        "input_mask": (2, "0 or 1"),
    }
    low = {name: np.inf for name in limits}
    high = {name: -np.inf for name in limits}
    batches = (
        tf.data.TFRecordDataset(path)
        .batch(4096)
        .map(lambda s: parse_records(s, sequence_length, max_predictions_per_seq, extra_features))
    )
    count = 0
    try:
        for features in batches:
            count += int(features["input_ids"].shape[0])
            for name in limits:
                values = features[name].numpy()
                low[name], high[name] = min(low[name], values.min()), max(high[name], values.max())
    except tf.errors.DataLossError as error:
        raise ValueError(f"{path} is corrupt after {count} records: {error.message}") from None
    except tf.errors.InvalidArgumentError as error:  # a later record of another shape
        raise ValueError(
            f"{path}: a record among records {count}..{count + 4095} does not parse as the run expects "
            f"(sequence_length {sequence_length}, max_predictions_per_seq {max_predictions_per_seq}): "
            f"{error.message.splitlines()[0]}"
        ) from None
    for name, (limit, what) in limits.items():
        if limit is not None and (low[name] < 0 or high[name] >= limit):
            bad = int(low[name] if low[name] < 0 else high[name])
            raise ValueError(
                f"{path}: feature {name} holds {bad}, outside [0, {limit}) ({what}); "
                f"the records were made with another vocabulary or settings."
            )
    return count


def _check_first_record(path, serialized, expected):
    try:
        example = tf.train.Example.FromString(serialized)
    except Exception as error:  # protobuf's DecodeError
        raise ValueError(f"{path}: the first record is not a tf.train.Example ({error}).") from None
    features = example.features.feature
    missing = sorted(set(expected) - set(features))
    if missing:
        raise ValueError(
            f"{path}: records lack the features {missing} (google-research/bert's, plus the "
            f"recipe's extra features, if it has any)."
        )
    for name, length in expected.items():
        feature = features[name]
        kind = feature.WhichOneof("kind")
        want = "float_list" if name in FLOAT_FEATURES else "int64_list"
        if kind != want:
            raise ValueError(f"{path}: feature {name} is a {kind}, expected {want}.")
        actual = len(getattr(feature, kind).value)
        if actual != length:
            what = (
                "sequence_length"
                if length == expected["input_ids"] and name != "masked_lm_positions"
                else "max_predictions_per_seq"
            )
            if name == "next_sentence_labels":
                what = "1"
            raise ValueError(
                f"{path}: feature {name} has length {actual}, but the run expects {length} ({what}); "
                f"the file was made with other settings."
            )


def parse_records(serialized, sequence_length, max_predictions_per_seq, extra_features=None):
    """Parse a batch of serialized records into int32/float32 tensors."""
    features = tf.io.parse_example(serialized, feature_spec(sequence_length, max_predictions_per_seq, extra_features))
    return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value for name, value in features.items()}

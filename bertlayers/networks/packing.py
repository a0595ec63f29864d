"""Unpadded execution: sequences packed into rows of a fixed token budget (static shapes for XLA),
computed side by side with positions restarting in each and attention confined to each (a
block-diagonal mask), so real-length batches cost their real tokens, not their padding.

    pack_sequences(inputs, token_budget, max_sequences)  padded [N, S] arrays → packed [R, T] rows
    packed_encoder(encoder, max_sequences)               the encoder's layers (weights shared) on packed rows
    packed_classifier(classifier, max_sequences)         a SequenceClassifier's head on them: logits [R, K, C]
    unpacked(packed_array, placement, ...)               per-sequence values back in the input order

Packed outputs equal the padded computation's for each sequence (tests/test_packing.py).
"""

import bisect

import keras
import numpy as np

from bertlayers.backend import TensorLike
from bertlayers.layers.packed_rows import PackedRows
from bertlayers.networks.block_stack import PACKED_INPUT_NAMES


def pack_sequences(inputs: dict, token_budget: int, max_sequences: int = 16) -> tuple[dict, np.ndarray]:
    """Pack padded sequences into rows of `token_budget` tokens (best fit, longest first: each
    sequence goes to the open row it fills most closely; O(N log R) for N sequences in R rows).

    Args:
      inputs: int arrays `[N, S]`: `token_ids`, `segment_ids`, `padding_mask` (1 at real tokens,
        padding on the right); any other `[N, S]` array (labels per token) is packed alongside.
      token_budget: T, the tokens of a packed row (a static shape: one compiled graph).
      max_sequences: K, the most sequences a row takes.

    Returns:
      (packed, placement): `packed` int32 arrays `[R, T]` (`token_ids`, `segment_ids`,
      `sequence_ids` 1..K per row and 0 at padding, and the other arrays), `placement` `[N, 3]`:
      each sequence's row, slot (its sequence id - 1) and start in that row.
    """
    mask = np.asarray(inputs["padding_mask"]).astype(bool)
    lengths = mask.sum(axis=1)
    # Each row's tokens are read as its first `length`: a mask with padding first (left padding)
    # or a hole would keep padding and drop real tokens.
    not_leading = mask != (np.arange(mask.shape[-1]) < lengths[:, None]) if mask.ndim == 2 else None
    if not_leading is not None and not_leading.any():
        row = int(np.argmax(not_leading.any(axis=1)))
        raise ValueError(
            f"Sequence {row}'s padding_mask {mask[row].astype(int).tolist()} is not its real tokens first and its "
            "padding after: pack_sequences packs right-padded rows (move a left-padded row's tokens to the front "
            "first)."
        )
    if lengths.size and lengths.max() > token_budget:
        raise ValueError(
            f"A sequence of {int(lengths.max())} tokens does not fit a packed row of token_budget {token_budget}."
        )
    if (lengths == 0).any():
        raise ValueError(f"Sequence {int(np.argmin(lengths))} has no real token (padding_mask all 0).")
    placement = np.zeros((len(lengths), 3), "int64")
    open_rows = []  # (room left, row) of the rows that take more sequences, sorted
    used, count = [], []  # tokens and sequences in each row
    for index in np.argsort(-lengths, kind="stable"):
        length = int(lengths[index])
        at = bisect.bisect_left(open_rows, (length, -1))  # the tightest row with room
        if at < len(open_rows):
            _, row = open_rows.pop(at)
        else:
            row = len(used)
            used.append(0)
            count.append(0)
        placement[index] = (row, count[row], used[row])
        used[row] += length
        count[row] += 1
        if count[row] < max_sequences and used[row] < token_budget:
            bisect.insort(open_rows, (token_budget - used[row], row))
    names = [name for name in inputs if name != "padding_mask"]
    packed = {name: np.zeros((len(used), token_budget), "int32") for name in names + ["sequence_ids"]}
    for index, (row, slot, start) in enumerate(placement):
        length = lengths[index]
        for name in names:
            packed[name][row, start : start + length] = np.asarray(inputs[name])[index, :length]
        packed["sequence_ids"][row, start : start + length] = slot + 1
    return packed, placement


def unpacked(values: TensorLike, placement: np.ndarray, lengths: TensorLike | None = None) -> np.ndarray:
    """Per-sequence values of packed outputs, in the input order: `values` `[R, K, ...]` (one per
    sequence: pooled outputs, logits) → `[N, ...]`; with `lengths`, `values` `[R, T, ...]` (one per
    token) → a list of N arrays `[length, ...]`."""
    values = np.asarray(values)
    if lengths is None:
        return values[placement[:, 0], placement[:, 1]]
    return [values[row, start : start + length] for (row, _, start), length in zip(placement, lengths)]


def packed_encoder(encoder: keras.Model, max_sequences: int, name: str | None = None) -> keras.Model:
    """`encoder`'s layers (its weights, shared) on packed rows.

    Inputs (int32 `[R, T]`): `token_ids`, `segment_ids`, `sequence_ids` (`pack_sequences`).
    Outputs: `sequence_output` `[R, T, H]`, `pooled_output` `[R, K, H]` (each sequence's summary
    as the encoder's pooler reads it; zeros in empty slots), `encoder_outputs`, `embedding_output`.
    """
    inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in PACKED_INPUT_NAMES}
    rows = PackedRows(name="packed_rows")(inputs["sequence_ids"])
    x, encoder_outputs, embedding_output = encoder.sequence_over(
        inputs["token_ids"], inputs["segment_ids"], {**inputs, **rows}, positions=rows["positions"]
    )  # [R, T, H]
    pooled = SequenceSummaries(encoder.pooler, max_sequences, name="sequence_summaries")(x, inputs["sequence_ids"])
    outputs = {
        "sequence_output": x,  # [R, T, H]
        "pooled_output": pooled,  # [R, K, H]
        "encoder_outputs": encoder_outputs,
        "embedding_output": embedding_output,
    }
    return keras.Model(inputs, outputs, name=name or f"packed_{encoder.name}")


def packed_classifier(classifier: keras.Model, max_sequences: int) -> keras.Model:
    """A `SequenceClassifier`'s encoder and head (weights shared) on packed rows: inputs as
    `packed_encoder`'s, output `logits` `[R, K, C]` (train with labels `[R, K]` and sample weights
    0 at empty slots: `packed_labels`)."""
    if getattr(classifier, "pooling", "pooler") != "pooler" or getattr(classifier, "feature_based", False):
        raise ValueError(
            f"packed_classifier reads the encoder's pooler; this classifier reads pooling={classifier.pooling!r}: "
            "build it with pooling='pooler' (a family's own pooling, mean included, is its pooler's)."
        )
    encoder = packed_encoder(classifier.encoder, max_sequences)
    inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in PACKED_INPUT_NAMES}
    pooled = encoder(inputs)["pooled_output"]
    return keras.Model(inputs, {"logits": classifier.head(pooled)}, name=f"packed_{classifier.name}")


def packed_labels(labels: TensorLike, placement: np.ndarray, rows: int, max_sequences: int) -> tuple:
    """Per-sequence `labels` `[N]` laid out as packed logits are, `[R, K]`, and sample weights
    `[R, K]`: 0 at empty slots, R·K/N at the N sequences, so that Keras's mean over the R·K slots
    is the mean over the sequences (the padded batch's loss)."""
    packed = np.zeros((rows, max_sequences), np.asarray(labels).dtype)
    weights = np.zeros((rows, max_sequences), "float32")
    packed[placement[:, 0], placement[:, 1]] = labels
    weights[placement[:, 0], placement[:, 1]] = rows * max_sequences / len(placement)
    return packed, weights


@keras.saving.register_keras_serializable(package="bertlayers")
class SequenceSummaries(keras.layers.Layer):
    """Each packed sequence's summary through an encoder's `Pooler` (shared): `[batch, K, H]`.

    Args:
      pooler: the encoder's `Pooler`.
      max_sequences: K.

    Call args:
      sequence: `[batch, seq, H]`; sequence_ids: int `[batch, seq]`.

    Returns:
      `[batch, max_sequences, H]`.
    """

    def __init__(self, pooler, max_sequences, **kwargs):
        super().__init__(**kwargs)
        self.pooler = pooler
        self.max_sequences = int(max_sequences)

    def build(self, sequence_shape, sequence_ids_shape=None):
        self.built = True

    def call(self, sequence, sequence_ids):
        return self.pooler.per_sequence(sequence, sequence_ids, self.max_sequences)

    def compute_output_shape(self, sequence_shape, sequence_ids_shape=None):
        return (sequence_shape[0], self.max_sequences, sequence_shape[-1])

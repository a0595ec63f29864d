"""SpanBERT: span boundaries checked against a direct computation, the boundary head against
its definition, and a tiny model pretrained on the real Wikipedia excerpt."""

import json
import math

import keras
import numpy as np
import pytest
import tensorflow as tf
from pretraining_fixtures import PREDICTIONS, SEQ, check_run_encoder, tiny_family_run

from bertlayers.families.bert import BertEncoder
from bertlayers.families.spanbert import (
    BOUNDARY_INPUTS,
    OBJECTIVE,
    SpanBertPretrainer,
    SpanBoundaryHead,
    span_boundaries,
)
from bertlayers.pretraining_data.tfrecords import parse_records


def direct_boundaries(positions, length):
    """For each masked position: walk out to the first unmasked token on each side."""
    chosen = set(positions)
    result = []
    for position in positions:
        left = position
        while left - 1 in chosen:
            left -= 1
        right = position
        while right + 1 in chosen:
            right += 1
        result.append((left - 1, right + 1, position - left))
    return result


def test_span_boundaries_equal_a_direct_computation():
    rng = np.random.default_rng(0)
    for _ in range(300):
        length = int(rng.integers(3, 40))
        count = int(rng.integers(1, length))
        positions = sorted(rng.choice(length, size=count, replace=False).tolist())
        left, right, offset = span_boundaries(positions, length)
        assert list(zip(left, right, offset)) == direct_boundaries(positions, length)
    # Adjacent spans merge; a span at the edge reaches past it.
    assert span_boundaries([0, 1, 4, 5, 6, 9], 10) == ([-1, -1, 3, 3, 3, 8], [2, 2, 7, 7, 7, 10], [0, 1, 0, 1, 2, 0])


@pytest.fixture(scope="module")
def spanbert_run(corpus, tmp_path_factory):
    return tiny_family_run(corpus, tmp_path_factory, "spanbert")


def test_records_carry_the_boundaries_of_their_masked_spans(spanbert_run):
    _, output, _ = spanbert_run
    spec = json.load(open(output / "data" / "data_spec.json"))
    assert (
        spec["masking"] == "span" and spec["examples"] == "single" and spec["extra_features"] == sorted(BOUNDARY_INPUTS)
    )
    files = sorted(str(p) for p in (output / "data").glob("*.tfrecord"))
    extra = OBJECTIVE.feature_lengths(SEQ, PREDICTIONS)
    records = next(
        iter(tf.data.TFRecordDataset(files).batch(400).map(lambda s: parse_records(s, SEQ, PREDICTIONS, extra)))
    )
    records = {k: np.asarray(v) for k, v in records.items()}
    spans = checked = 0
    for row in range(len(records["input_ids"])):
        count = int(records["masked_lm_weights"][row].sum())
        positions = records["masked_lm_positions"][row, :count].tolist()
        length = int(records["input_mask"][row].sum())
        expected = direct_boundaries(positions, length)
        stored = list(zip(*(records[name][row, :count].tolist() for name in BOUNDARY_INPUTS)))
        assert stored == expected
        # [CLS] and [SEP] are never masked: every span has a token on each side.
        assert all(0 <= left and right < length for left, right, _ in stored)
        spans += sum(offset == 0 for _, _, offset in stored)
        checked += count
    assert checked > 1000 and checked / spans > 2  # spans, not single tokens


def test_boundary_head_follows_its_definition():
    embedding = keras.layers.ReversibleEmbedding(50, 8)
    embedding.build()
    head = SpanBoundaryHead(embedding, max_span_length=4, position_embedding_size=6)
    rng = np.random.default_rng(1)
    sequence = rng.normal(size=(2, 9, 8)).astype("float32")
    left = np.array([[0, 0, 3], [4, 1, 1]], "int32")
    right = np.array([[3, 3, 8], [8, 5, 5]], "int32")
    offsets = np.array([[0, 1, 0], [2, 0, 6]], "int32")  # 6 is past the table: its last row
    logits = np.asarray(head(sequence, left, right, offsets))
    for variable in head.weights:  # nonzero biases and LayerNorm shifts, so none can hide
        variable.assign(variable.numpy() + rng.normal(scale=0.1, size=variable.shape).astype("float32"))
    logits = np.asarray(head(sequence, left, right, offsets))

    def layer_norm(x, norm):
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + norm.epsilon) * norm.gamma.numpy() + norm.beta.numpy()

    erf = np.vectorize(math.erf)
    gelu = lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2)))  # noqa: E731
    table = head.offset_embedding.embeddings.numpy()
    for b in range(2):
        for p in range(3):
            h = np.concatenate([sequence[b, left[b, p]], sequence[b, right[b, p]], table[min(offsets[b, p], 3)]])
            h = layer_norm(gelu(h @ head.dense_1.kernel.numpy() + head.dense_1.bias.numpy()), head.layer_norm_1)
            h = layer_norm(gelu(h @ head.dense_2.kernel.numpy() + head.dense_2.bias.numpy()), head.layer_norm_2)
            expected = h @ embedding.embeddings.numpy().T + head.output_bias.numpy()
            np.testing.assert_allclose(logits[b, p], expected, atol=1e-4)


def test_tiny_spanbert_learns_both_objectives_on_real_text(spanbert_run):
    _, output, summary = spanbert_run
    history = json.load(open(output / "history.json"))
    assert summary["steps"] == 60
    assert summary["last_epoch_mlm_loss"] < summary["initial_mlm_loss"] - 0.5, summary
    initial = json.load(open(output / "initial_loss.json"))
    assert history[-1]["sbo_loss"] < initial["sbo_loss"] - 0.5, (initial, history[-1])
    pretrainer = keras.saving.load_model(str(output / "pretrainer.keras"), safe_mode=True)
    assert isinstance(pretrainer, SpanBertPretrainer)
    assert pretrainer.boundary_head.token_embedding is pretrainer.encoder.token_embedding
    # What `run_classifier.py --init RUN` loads (a run's fine-tune, export and serve: test_xlnet's).
    check_run_encoder(output, pretrainer, BertEncoder)

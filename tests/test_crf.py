"""The linear-chain CRF against brute force: every tag path of small random cases enumerated."""

import itertools

import keras
import numpy as np
import pytest

from bertlayers.layers.crf import LinearChainCRF
from bertlayers.testing import run_layer_test


def _crf(num_tags, seed):
    crf = LinearChainCRF(num_tags)
    crf.build()
    rng = np.random.default_rng(seed)
    crf.transitions.assign(rng.normal(size=(num_tags, num_tags)).astype("float32"))
    crf.start_transitions.assign(rng.normal(size=num_tags).astype("float32"))
    crf.end_transitions.assign(rng.normal(size=num_tags).astype("float32"))
    return crf


def _brute_force(crf, emissions, mask):
    """(log Σ exp score, best path, its score) of one row, over its real positions only."""
    transitions, start, end = (np.asarray(w) for w in (crf.transitions, crf.start_transitions, crf.end_transitions))
    real = np.flatnonzero(mask)
    if not len(real):
        return 0.0, [0] * len(mask), 0.0
    scores = {}
    for path in itertools.product(range(crf.num_tags), repeat=len(real)):
        score = start[path[0]] + end[path[-1]] + sum(emissions[t, y] for t, y in zip(real, path))
        score += sum(transitions[a, b] for a, b in zip(path, path[1:]))
        scores[path] = score
    values = np.array(list(scores.values()))
    best = max(scores, key=scores.get)
    full = [0] * len(mask)
    for t, y in zip(real, best):
        full[t] = y
    return float(np.log(np.exp(values - values.max()).sum()) + values.max()), full, float(scores[best])


@pytest.mark.parametrize("seed", range(4))
def test_log_likelihood_and_viterbi_equal_brute_force(seed):
    rng = np.random.default_rng(100 + seed)
    num_tags, length = 3, 5
    crf = _crf(num_tags, seed)
    emissions = rng.normal(size=(5, length, num_tags)).astype("float32")
    mask = np.ones((5, length), "int32")
    mask[1, 3:] = 0  # right padding
    mask[2, :2] = 0  # left padding
    mask[3, 1:] = 0  # a sequence of one token
    mask[4, [1, 3]] = 0  # holes: only real tokens count, wherever the padding is
    tags = rng.integers(0, num_tags, size=(5, length)).astype("int32")
    log_z = np.asarray(crf.log_partition(emissions, mask))
    path_scores = np.asarray(crf.path_score(emissions, tags, mask))
    decoded, best_scores = (np.asarray(x) for x in crf.decode(emissions, mask))
    for row in range(5):
        want_z, want_path, want_best = _brute_force(crf, emissions[row], mask[row])
        np.testing.assert_allclose(log_z[row], want_z, rtol=1e-5, atol=1e-5)
        assert decoded[row].tolist() == want_path, row
        np.testing.assert_allclose(best_scores[row], want_best, rtol=1e-5, atol=1e-5)
        real = np.flatnonzero(mask[row])
        transitions, start, end = (np.asarray(w) for w in (crf.transitions, crf.start_transitions, crf.end_transitions))
        path = tags[row, real]
        score = (
            start[path[0]]
            + end[path[-1]]
            + emissions[row, real, path].sum()
            + sum(transitions[a, b] for a, b in zip(path, path[1:]))
        )
        np.testing.assert_allclose(path_scores[row], score, rtol=1e-5, atol=1e-5)
    # The probabilities of every tag path of a padded row sum to one.
    row = 1
    paths = np.array(list(itertools.product(range(num_tags), repeat=length)), "int32")  # [T^S, S]
    copies = np.repeat(emissions[row : row + 1], len(paths), axis=0)
    likelihood = np.asarray(crf.log_likelihood(copies, paths, np.repeat(mask[row : row + 1], len(paths), axis=0)))
    # Paths that differ only at padding are one path: count each real-token path once.
    distinct = {tuple(p[mask[row] == 1]): l for p, l in zip(paths, likelihood)}
    np.testing.assert_allclose(np.exp(list(distinct.values())).sum(), 1.0, rtol=1e-5)


def test_an_empty_row_and_a_trained_step():
    crf = _crf(2, 0)
    emissions = np.random.default_rng(0).normal(size=(2, 3, 2)).astype("float32")
    mask = np.array([[0, 0, 0], [1, 1, 1]], "int32")
    assert np.asarray(crf.log_partition(emissions, mask))[0] == 0.0
    assert np.asarray(crf(emissions, mask))[0].tolist() == [0, 0, 0]
    # The negative log-likelihood trains the transitions: finite gradients through the empty row.
    inputs = {
        "emissions": keras.Input((3, 2)),
        "padding_mask": keras.Input((3,), dtype="int32"),
        "tags": keras.Input((3,), dtype="int32"),
    }
    model = keras.Model(inputs, crf(**inputs))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=lambda _, nll: nll)
    before = [np.asarray(w) for w in crf.trainable_weights]
    tags = np.array([[0, 0, 0], [1, 0, 1]], "int32")
    model.fit({"emissions": emissions, "padding_mask": mask, "tags": tags}, np.zeros(2), batch_size=2, verbose=0)
    after = [np.asarray(w) for w in crf.trainable_weights]
    assert all(np.isfinite(w).all() for w in after)
    assert any(np.abs(a - b).sum() > 0 for a, b in zip(after, before))


def test_config_round_trip_and_saving(tmp_path):
    crf = _crf(4, 1)
    emissions = np.random.default_rng(1).normal(size=(2, 6, 4)).astype("float32")
    inputs = keras.Input((None, 4))
    model = keras.Model(inputs, crf(inputs))
    path = str(tmp_path / "crf.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_array_equal(np.asarray(loaded(emissions)), np.asarray(model(emissions)))
    assert LinearChainCRF.from_config(crf.get_config()).get_config() == crf.get_config()
    with pytest.raises(ValueError, match="num_tags >= 1"):
        LinearChainCRF(0)


def test_the_shared_layer_checks():
    """Config, symbolic and eager calls, save and load, a fit step on the negative
    log-likelihood (the call with gold tags), and mixed precision (sums stay float32)."""
    rng = np.random.default_rng(2)
    mask = np.ones((2, 5), "int32")
    mask[1, 3:] = 0
    inputs = {
        "emissions": rng.normal(size=(2, 5, 3)).astype("float32"),
        "padding_mask": mask,
        "tags": rng.integers(0, 3, size=(2, 5)).astype("int32"),
    }
    run_layer_test(LinearChainCRF, {"num_tags": 3}, inputs, (2,), mixed_output_dtype="float32")


@pytest.mark.tensorflow_only
def test_a_graph_of_unknown_batch_and_length():
    """Served models and length-cut batches trace with `[None, None]` inputs (TensorFlow's scan
    once failed on several inputs of unknown length)."""
    import tensorflow as tf

    crf = _crf(3, 3)
    rng = np.random.default_rng(3)
    emissions = rng.normal(size=(2, 4, 3)).astype("float32")
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], "int32")
    tags = rng.integers(0, 3, size=(2, 4)).astype("int32")
    specs = [tf.TensorSpec([None, None, 3]), tf.TensorSpec([None, None], tf.int32)]
    decode = tf.function(lambda e, m: crf.decode(e, m)[0], input_signature=specs)
    likelihood = tf.function(
        lambda e, t, m: crf.log_likelihood(e, t, m), input_signature=[specs[0], specs[1], specs[1]]
    )
    np.testing.assert_array_equal(decode(emissions, mask).numpy(), np.asarray(crf.decode(emissions, mask)[0]))
    np.testing.assert_allclose(
        likelihood(emissions, tags, mask).numpy(), np.asarray(crf.log_likelihood(emissions, tags, mask)), rtol=1e-6
    )


@pytest.mark.slow
def test_a_crf_tagger_trains_on_every_real_tokens_tag_and_outputs_its_viterbi_path(tmp_path):
    from bertlayers.families.bert import BertEncoder
    from bertlayers.models import TokenClassifier

    encoder = BertEncoder(
        vocabulary_size=50, num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32, max_sequence_length=16
    )
    model = TokenClassifier(encoder, 3, crf=True)
    ids = np.random.default_rng(0).integers(1, 50, (8, 6)).astype("int32")
    ids[:, 4:], ids[0, 1:] = 0, 0  # padding, and a one-token row
    x = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": (ids != 0).astype("int32")}
    tags = (ids % 3).astype("int32")
    model.compile(keras.optimizers.Adam(1e-2))
    history = model.fit(x, {"tags": tags}, epochs=30, batch_size=8, verbose=0)
    assert history.history["loss"][-1] < 0.1 * history.history["loss"][0]
    outputs = model.predict_on_batch(x)
    np.testing.assert_array_equal(
        outputs["tags"], np.asarray(model.crf.decode(outputs["logits"], x["padding_mask"])[0])
    )
    real = x["padding_mask"] == 1
    assert (outputs["tags"][real] == tags[real]).mean() > 0.9
    model.save(str(tmp_path / "tagger.keras"))
    np.testing.assert_array_equal(
        keras.saving.load_model(str(tmp_path / "tagger.keras")).predict_on_batch(x)["tags"], outputs["tags"]
    )
    with pytest.raises(ValueError, match=r"A CRF tagger trains on gold tags: y=\{'tags'"):
        model.fit(x, {"logits": tags}, verbose=0)

"""Layer probes (`bertlayers.runs.probing`): the probe is the logistic regression it says it is
(against one fitted by hand), it reads each hidden state at each word's first piece, and the runner
prints a row per hidden state."""

import numpy as np
import pytest

from bertlayers.families.bert import BertEncoder
from bertlayers.runs.probing import fit_probe, fit_probes, probe_layers, word_states

TINY = dict(vocabulary_size=1000, num_layers=2, hidden_size=16, num_heads=2, intermediate_size=32, dropout=0.0)


def _hand_fitted_logistic_regression(x, y, classes, l2, steps=20000, rate=0.5):
    """Full-batch gradient descent on mean cross-entropy + l2 · ‖W‖² (bias unpenalized), to convergence."""
    w, b = np.zeros((x.shape[1], classes)), np.zeros(classes)
    onehot = np.eye(classes)[y]
    for _ in range(steps):
        logits = x @ w + b
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        w -= rate * (x.T @ (p - onehot) / len(x) + 2 * l2 * w)
        b -= rate * (p - onehot).mean(0)
    return w, b


def test_the_probe_is_the_hand_fitted_logistic_regression():
    """Overlapping classes (so the optimum is finite and unique): the probe's probabilities and
    predictions equal those of the regression fitted by hand on the same objective."""
    rng = np.random.default_rng(0)
    centers = np.array([[0.0, 0.0], [1.5, 0.5], [0.3, 1.6]])
    y = rng.integers(0, 3, 120)
    x = (centers[y] + rng.normal(0, 0.8, (120, 2))).astype("float32")
    w, b = _hand_fitted_logistic_regression(x, y, 3, l2=0.01)
    probe = fit_probe(x, y, 3, l2=0.01, epochs=1500, batch_size=None, learning_rate=0.05)
    grid = rng.normal(0.7, 1.2, (200, 2)).astype("float32")
    ours = np.asarray(probe.predict(grid, verbose=0))
    theirs = grid @ w + b
    softmax = lambda z: np.exp(z - z.max(1, keepdims=True)) / np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True)  # noqa: E731
    np.testing.assert_allclose(softmax(ours), softmax(theirs), atol=2e-3)
    np.testing.assert_array_equal(ours.argmax(1), theirs.argmax(1))
    accuracy = lambda logits: np.mean((x @ w + b if logits is None else logits).argmax(1) == y)  # noqa: E731
    assert accuracy(np.asarray(probe.predict(x, verbose=0))) == accuracy(None)


def test_a_probe_trained_beside_others_is_the_probe_trained_alone():
    """As probe_layers trains every hidden state's probe (`fit_probes`): step for step the probe
    trained alone (minibatches: the same batches; 10 epochs of 2 steps)."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 120)
    x, other, grid = (rng.normal(0, 1, (n, 2)).astype("float32") for n in (120, 120, 50))
    x += np.array([[0.0, 0.0], [1.5, 0.5], [0.3, 1.6]], "float32")[y]
    alone = fit_probe(x, y, 3, l2=0.01, epochs=10, batch_size=64)
    probes = fit_probes([other, x], y, 3, l2=0.01, epochs=10, batch_size=64)
    together = np.asarray(probes.predict(np.stack([grid, grid], axis=1), verbose=0))[:, 1]
    np.testing.assert_allclose(together, np.asarray(alone.predict(grid, verbose=0)), atol=1e-5)


def test_bad_probe_inputs_are_named():
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 2\)"):
        fit_probe(np.zeros((3, 2)), np.array([0, 1, 2]), 2)
    with pytest.raises(ValueError, match="features \\[words, H\\] and labels \\[words\\]"):
        fit_probe(np.zeros((3, 2)), np.array([0, 1]), 2)
    with pytest.raises(ValueError, match="epochs"):
        fit_probe(np.zeros((3, 2)), np.array([0, 1, 1]), 2, epochs=0)


def test_word_states_are_each_hidden_state_at_each_words_first_piece():
    encoder = BertEncoder(**TINY)
    rng = np.random.default_rng(1)
    inputs = {
        "token_ids": rng.integers(5, 1000, (3, 7)).astype("int32"),
        "segment_ids": np.zeros((3, 7), "int32"),
        "padding_mask": np.array([[1] * 7, [1] * 5 + [0] * 2, [1] * 4 + [0] * 3], "int32"),
    }
    starts = [[1, 2, 4], [1, 3, -1], [2]]
    states = word_states(encoder, inputs, starts, batch_size=2)  # batches split across sentences
    outputs = encoder(inputs)
    layers = [outputs["embedding_output"], *outputs["encoder_outputs"]]
    assert len(states) == 3 and all(s.shape == (6, 16) for s in states)
    picked = [(0, 1), (0, 2), (0, 4), (1, 1), (1, 3), (2, 2)]  # the cut word left out
    for state, layer in zip(states, layers):
        np.testing.assert_allclose(state, np.asarray(layer)[[r for r, _ in picked], [p for _, p in picked]], atol=1e-5)


@pytest.mark.slow(reason="probes every hidden state of a real encoder")
@pytest.mark.tensorflow_only
def test_probe_layers_scores_every_hidden_state_on_real_tweets():
    from bertlayers.task_data.ner import read_conll, tag_vocabulary
    from bertlayers.tokenizers import model_tokenizer
    from bertlayers.utils.assets import asset_path, bert_uncased_vocabulary

    sentences = read_conll(asset_path("wnut16"))
    train, evaluation = sentences[:200], sentences[200:260]
    tags = tag_vocabulary(sentences[:260])
    tokenizer = model_tokenizer(bert_uncased_vocabulary()).in_graph()
    encoder = BertEncoder(**{**TINY, "vocabulary_size": 30522})
    results = probe_layers(encoder, tokenizer, train, evaluation, tags, sequence_length=48, epochs=20, seeds=(0, 1))
    assert [r["layer"] for r in results] == [0, 1, 2]
    for r in results:
        accuracy, entity, f1 = r["accuracy"], r["entity_word_accuracy"], r["entity_f1"]
        assert 0.5 < accuracy["min"] <= accuracy["mean"] <= accuracy["max"] <= 1 and len(accuracy["runs"]) == 2
        assert 0 <= entity["mean"] <= 1 and 0 <= f1["mean"] <= 100
        assert r["baseline_accuracy"] == results[0]["baseline_accuracy"] > 0.8  # "O" is most words
        # Trained, the probe does at least about as well as tagging every word "O".
        assert accuracy["mean"] >= r["baseline_accuracy"] - 0.02


@pytest.mark.slow(reason="the probing runner end to end")
@pytest.mark.tensorflow_only
def test_the_runner_writes_a_row_per_hidden_state(tmp_path):
    import json

    from processes import run_script

    from bertlayers.task_data.ner import read_conll, write_conll
    from bertlayers.utils.assets import asset_path

    sentences = read_conll(asset_path("wnut16"))
    write_conll(str(tmp_path / "train.conll"), sentences[:120])
    write_conll(str(tmp_path / "eval.conll"), sentences[120:160])
    out = tmp_path / "probe"
    run_script(
        "probe_layers.py",
        *("--train_file", tmp_path / "train.conll", "--eval_file", tmp_path / "eval.conll"),
        *("--output_dir", out, "--epochs", 2, "--sequence_length", 48, "--seeds", 0, 1),
    )
    layers = json.load(open(out / "probe.json"))["layers"]
    assert len(layers) == 7  # MiniLM: the embeddings and 6 layers
    table = (out / "probe.md").read_text().splitlines()
    assert table[2].startswith("| embeddings |") and table[8].startswith("| layer 6 |")
    assert "of 2 probe seeds" in table[0] and table[2].count("[") == 3

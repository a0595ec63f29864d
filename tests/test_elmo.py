"""ELMo's pieces against their definitions: the highway and character-CNN formulas (NumPy), the
projected LSTM step, allennlp's character ids, a biLM whose directions cannot see the word they
predict, and its two losses on a hand-computed case. Runs under TensorFlow and JAX."""

import keras
import numpy as np
import pytest

from bertlayers.families.elmo import (
    BidirectionalLanguageModel,
    CharacterCnn,
    Highway,
    ProjectedLstmCell,
    batch_character_ids,
    character_ids,
    reverse_within_lengths,
    sentence_character_ids,
)
from bertlayers.layers import ScalarMix
from bertlayers.testing import run_layer_test


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def numpy_highway(x, layers):
    for kernel, bias in layers:
        transform, gate = np.split(x @ kernel + bias, 2, axis=-1)
        gate = sigmoid(gate)
        x = gate * x + (1 - gate) * np.maximum(transform, 0)
    return x


def test_highway_is_the_gated_carry_formula():
    layer = Highway(num_layers=2)
    x = np.random.default_rng(0).normal(size=(3, 4, 6)).astype("float32")
    out = keras.ops.convert_to_numpy(layer(x))
    weights = [(np.asarray(d.kernel), np.asarray(d.bias)) for d in layer.projections]
    np.testing.assert_allclose(out, numpy_highway(x, weights), atol=1e-5)
    # The gate's bias starts at 1 (mostly carry), the transform's at 0.
    np.testing.assert_array_equal(weights[0][1], [0.0] * 6 + [1.0] * 6)
    run_layer_test(Highway, {"num_layers": 1}, {"inputs": x}, (3, 4, 6))


def test_character_cnn_is_embedding_convolutions_max_highway_projection():
    filters = ((1, 3), (3, 5))
    layer = CharacterCnn(filters, character_vocabulary=20, character_embedding=4, highway_layers=1, output_width=7)
    ids = np.random.default_rng(1).integers(1, 20, size=(2, 3, 6)).astype("int32")
    ids[0, 1, 4:] = 0  # a shorter word's padding
    out = keras.ops.convert_to_numpy(layer(ids))
    table = np.asarray(layer.embedding.embeddings)
    embedded = table[ids] * (ids != 0)[..., None]  # [B, S, C, E], padding's row zero
    pooled = []
    for (width, _), convolution in zip(filters, layer.convolutions):
        kernel, bias = np.asarray(convolution.kernel), np.asarray(convolution.bias)  # [w, E, F]
        windows = np.stack([embedded[:, :, i : i + width] for i in range(6 - width + 1)], axis=2)  # [B,S,T,w,E]
        convolved = np.einsum("bstwe,wef->bstf", windows, kernel) + bias
        pooled.append(np.maximum(convolved.max(axis=2), 0))
    features = numpy_highway(
        np.concatenate(pooled, -1), [(np.asarray(d.kernel), np.asarray(d.bias)) for d in layer.highway.projections]
    )
    expected = features @ np.asarray(layer.projection.kernel) + np.asarray(layer.projection.bias)
    np.testing.assert_allclose(out, expected, atol=1e-5)
    run_layer_test(
        CharacterCnn,
        {"filters": filters, "character_vocabulary": 20, "character_embedding": 4, "output_width": 7},
        {"character_ids": ids},
        (2, 3, 7),
    )
    with pytest.raises(ValueError, match="filters must be"):
        CharacterCnn(((0, 3),))


def test_character_ids_are_allennlps():
    # allennlp: bytes + 1 between beginning (258 + 1) and end (259 + 1) of word, padding 260 + 1.
    assert character_ids("hello")[:8] == [259, 105, 102, 109, 109, 112, 260, 261]
    assert len(character_ids("hello")) == 50 and set(character_ids("hello")[7:]) == {261}
    assert character_ids("<S>")[:4] == [259, 257, 260, 261] and character_ids("</S>")[:4] == [259, 258, 260, 261]
    assert character_ids("é")[:4] == [259, 196, 170, 260]  # UTF-8 bytes
    assert character_ids("x" * 60)[-1] == 260  # cut to 48 characters, the end marker kept
    assert sentence_character_ids(["a"]).shape == (3, 50)


def test_projected_lstm_cell_step():
    cell = ProjectedLstmCell(5, 3, cell_clip=0.5, projection_clip=0.2)
    rng = np.random.default_rng(2)
    x, h, c = (rng.normal(size=s).astype("float32") for s in ((2, 4), (2, 3), (2, 5)))
    cell.build((2, 4))
    out, (new_h, new_c) = cell(x, [h, c])
    gates = x @ np.asarray(cell.input_kernel) + h @ np.asarray(cell.state_kernel) + np.asarray(cell.bias)
    i, f, g, o = np.split(gates, 4, axis=-1)
    expected_c = np.clip(sigmoid(f) * c + sigmoid(i) * np.tanh(g), -0.5, 0.5)
    expected_h = np.clip((sigmoid(o) * np.tanh(expected_c)) @ np.asarray(cell.projection_kernel), -0.2, 0.2)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(new_c), expected_c, atol=1e-6)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(out), expected_h, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(cell.bias)[5:10], 1.0)  # the forget gate's


def test_reverse_within_lengths_keeps_padding_in_place():
    x = np.arange(10, dtype="float32").reshape(2, 5)[..., None]
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    out = keras.ops.convert_to_numpy(reverse_within_lengths(x, mask))[..., 0]
    np.testing.assert_array_equal(out, [[2, 1, 0, 3, 4], [9, 8, 7, 6, 5]])


def tiny_bilm():
    return BidirectionalLanguageModel(
        30, filters=((1, 4), (2, 4)), character_embedding=4, num_layers=2, units=6, projection_units=5, dropout=0.0
    )


def batch(sentences, length):
    inputs = batch_character_ids(sentences + [["w"] * (length - 2)])  # a filler row sets the length
    characters, mask = inputs["character_ids"][:-1], inputs["padding_mask"][:-1]
    words = np.random.default_rng(3).integers(1, 30, size=mask.shape).astype("int32") * mask
    return {"character_ids": characters, "padding_mask": mask, "word_ids": words}


def outputs(model, x):
    return {k: keras.ops.convert_to_numpy(v) for k, v in model(x).items()}


def test_neither_direction_sees_the_word_it_predicts():
    model = tiny_bilm()
    x = batch([["the", "cat", "sat", "down"]], 6)
    changed = {**x, "character_ids": x["character_ids"].copy()}
    changed["character_ids"][0, 3] = character_ids("dog")  # word t = 3 ("sat" → "dog")
    before, after = outputs(model, x), outputs(model, changed)
    top = before["layers"].shape[-1] // 2
    # Forward states at t' < 3 and backward states at t' > 3 have not read word 3 ...
    np.testing.assert_allclose(after["layers"][0, 1:, :3, :top], before["layers"][0, 1:, :3, :top], atol=1e-6)
    np.testing.assert_allclose(after["layers"][0, 1:, 4:, top:], before["layers"][0, 1:, 4:, top:], atol=1e-6)
    # ... so the forward prediction of word 3 (at t = 2) and the backward one (at t = 4) ignore it,
    np.testing.assert_allclose(after["forward_logits"][0, 2], before["forward_logits"][0, 2], atol=1e-6)
    np.testing.assert_allclose(after["backward_logits"][0, 4], before["backward_logits"][0, 4], atol=1e-6)
    # while each direction's state at word 3 itself does read it.
    assert np.abs(after["layers"][0, 2, 3] - before["layers"][0, 2, 3]).max() > 1e-4


def test_padding_does_not_change_a_sentence():
    model = tiny_bilm()
    alone = outputs(model, batch([["a", "b", "c"]], 5))
    padded = outputs(model, batch([["a", "b", "c"], ["x", "y", "z", "w", "v"]], 7))
    for key in ("forward_logits", "backward_logits"):
        np.testing.assert_allclose(padded[key][0, :5], alone[key][0], atol=1e-5)
    np.testing.assert_allclose(padded["layers"][0, :, :5], alone["layers"][0], atol=1e-5)
    np.testing.assert_array_equal(padded["layers"][0, 1:, 5:], 0.0)


def test_losses_are_each_directions_shifted_cross_entropy():
    model = tiny_bilm()
    x = batch([["a", "b", "c"], ["d", "e"]], 5)
    out = outputs(model, x)
    losses = {k: float(v) for k, v in model.language_model_losses(x, model(x)).items()}

    def cross_entropy(logits, target):
        logits = logits - logits.max()
        return np.log(np.exp(logits).sum()) - logits[target]

    forward, backward = [], []
    for row, length in enumerate(x["padding_mask"].sum(1)):
        words = x["word_ids"][row]
        forward += [cross_entropy(out["forward_logits"][row, t], words[t + 1]) for t in range(length - 1)]
        backward += [cross_entropy(out["backward_logits"][row, t], words[t - 1]) for t in range(1, length)]
    assert abs(losses["forward_loss"] - np.mean(forward)) < 1e-5
    assert abs(losses["backward_loss"] - np.mean(backward)) < 1e-5
    assert abs(losses["forward_loss"] - np.log(30)) < 0.3  # untrained: about uniform


@pytest.mark.slow
def test_bilm_trains_saves_and_mixes_into_elmo_vectors(tmp_path):
    model = tiny_bilm()
    x = batch([["a", "b", "c"], ["d", "e"], ["a", "b", "c", "d"]], 6)
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    history = model.fit(x, epochs=15, verbose=0).history
    assert history["forward_loss"][-1] < history["forward_loss"][0] - 0.5
    assert history["backward_loss"][-1] < history["backward_loss"][0] - 0.5
    path = str(tmp_path / "bilm.keras")
    model.save(path)
    revived = keras.saving.load_model(path, safe_mode=True)
    for key, value in outputs(model, x).items():
        np.testing.assert_allclose(outputs(revived, x)[key], value, atol=1e-6)
    # ELMo_k = γ Σ_j s_j h_k,j over the biLM's L + 1 layers.
    layers = outputs(model, x)["layers"]
    mix = ScalarMix()
    mixed = keras.ops.convert_to_numpy(mix([layers[:, j] for j in range(layers.shape[1])]))
    np.testing.assert_allclose(mixed, layers.mean(axis=1), atol=1e-6)  # s equal, γ 1 at first


def test_feature_classifier_trains_the_mix_and_the_task_network_only():
    from bertlayers.families.elmo import WordFeatureBatches, word_feature_classifier

    bilm = tiny_bilm()
    encoder = bilm.finished_encoder()
    vectors = np.random.default_rng(4).normal(size=(5, 3)).astype("float32")
    index = {"good": 1, "bad": 2, "film": 3, "plot": 4}
    texts = ["good film", "bad plot", "good plot", "bad film"] * 4
    labels = [0, 1, 0, 1] * 4
    model = word_feature_classifier(2, encoder, vectors, lstm_units=4, dropout=0.0)
    frozen = [np.asarray(w).copy() for w in bilm.weights]
    mix = model.get_layer("scalar_mix")
    before = np.asarray(mix.layer_weights).copy()
    model.compile(
        optimizer=keras.optimizers.Adam(0.05),
        loss={"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
    )
    history = model.fit(WordFeatureBatches(texts, labels, index, batch_size=8, seed=0), epochs=6, verbose=0).history
    assert history["loss"][-1] < history["loss"][0]
    for now, then in zip(bilm.weights, frozen, strict=True):  # the biLM does not move
        np.testing.assert_array_equal(np.asarray(now), then)
    np.testing.assert_array_equal(np.asarray(model.get_layer("word_vectors").embeddings), vectors)
    assert np.abs(np.asarray(mix.layer_weights) - before).max() > 0  # the mix's s_j learn
    with pytest.raises(ValueError, match="needs ELMo"):
        word_feature_classifier(2)


def test_scalar_mix_can_normalize_each_layer_first():
    rng = np.random.default_rng(5)
    layers = [rng.normal(loc=3.0 * j, scale=1.0 + j, size=(2, 4, 6)).astype("float32") for j in range(3)]
    mix = ScalarMix(layer_norm=True)
    out = keras.ops.convert_to_numpy(mix(layers))
    normalized = [(h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-6) for h in layers]
    np.testing.assert_allclose(out, np.mean(normalized, axis=0), atol=1e-5)  # s equal, γ 1 at first
    assert ScalarMix.from_config(mix.get_config()).layer_norm


@pytest.mark.slow(reason="probes every biLM layer: the probe's path is test_probing's, the biLM's the other cases here")
def test_bilm_layers_are_probed_per_word():
    from bertlayers.runs.probing import bilm_word_states, probe_bilm_layers

    model = tiny_bilm()
    encoder = model.finished_encoder()
    sentences = [[("Paris", "B-loc"), ("is", "O")], [("big", "O"), ("Rome", "B-loc"), ("too", "O")]] * 4
    states = bilm_word_states(encoder, [[w for w, _ in s] for s in sentences[:2]])
    layers = outputs(model, batch([["Paris", "is"], ["big", "Rome", "too"]], 5))["layers"]
    assert len(states) == 3 and states[0].shape == (5, 10)
    np.testing.assert_allclose(states[2][3], layers[1, 2, 2], atol=1e-5)  # "Rome": word 2 of sentence 2
    results = probe_bilm_layers(encoder, sentences, sentences, ["O", "B-loc"], epochs=30, learning_rate=0.1)
    assert [r["layer"] for r in results] == [0, 1, 2]
    assert results[0]["accuracy"]["mean"] >= results[0]["baseline_accuracy"]

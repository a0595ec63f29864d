"""DeBERTa-v2/v3: the encoder and its checkpoints against transformers' outputs for the same randomly
initialized models (tests/fixtures/record_deberta_v2.py): v3 settings (shared keys, log buckets that
matter at the inputs' length, a normalized table) with both MLM head layouts and a classifier, v2
settings (own position projections, clipped distances, absolute positions, segments, the convolution
after the first layer), within 1e-5 in float32; the layers through the shared tests; the presets'
sizes against transformers' parameter counts; refusals named."""

import json
import os

import numpy as np
import pytest

from bertlayers.convert import load_encoder
from bertlayers.convert.huggingface import HUGGINGFACE_FAMILIES
from bertlayers.families.deberta_v2 import DebertaV2Encoder
from bertlayers.layers import RelativePositionTable, ResidualConvolution
from bertlayers.testing import run_encoder_test, run_layer_test

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
REFERENCE = np.load(os.path.join(FIXTURES, "deberta_v2.npz"))
ATOL = 1e-5
MASKED_LM = ["deberta_v3", "deberta_v3_lm_predictions", "deberta_v2"]


def _folder(name):
    return os.path.join(FIXTURES, "deberta_v2", name)


def _inputs(name):
    return {key: REFERENCE[f"{name}.{key}"] for key in ("token_ids", "segment_ids", "padding_mask")}


def _close_at_real_tokens(ours, theirs, mask):
    real = mask.astype(bool)
    np.testing.assert_allclose(np.asarray(ours)[real], theirs[real], atol=ATOL, rtol=1e-5)


@pytest.mark.parametrize("name", MASKED_LM + ["deberta_v3_classifier"])
def test_folders_give_transformers_hidden_states_at_every_layer(name):
    inputs = _inputs(name)
    outputs = load_encoder(_folder(name))(inputs)
    layers = REFERENCE[f"{name}.layers"]  # [L + 1, B, S, H]: the embeddings, then each layer
    _close_at_real_tokens(outputs["embedding_output"], layers[0], inputs["padding_mask"])
    for depth, state in enumerate(outputs["encoder_outputs"]):
        _close_at_real_tokens(state, layers[depth + 1], inputs["padding_mask"])
    _close_at_real_tokens(outputs["sequence_output"], REFERENCE[f"{name}.hidden"], inputs["padding_mask"])


@pytest.mark.parametrize("name", MASKED_LM)
def test_masked_lm_folders_give_transformers_logits(name):
    inputs = _inputs(name)
    pretrainer = HUGGINGFACE_FAMILIES["deberta-v2"].loader(_folder(name))
    positions = np.tile(np.arange(inputs["token_ids"].shape[1], dtype="int32"), (len(inputs["token_ids"]), 1))
    logits = pretrainer({**inputs, "masked_positions": positions})["mlm"]
    _close_at_real_tokens(logits, REFERENCE[f"{name}.logits"], inputs["padding_mask"])


def test_classifier_folder_gives_transformers_logits():
    name = "deberta_v3_classifier"
    classifier = HUGGINGFACE_FAMILIES["deberta-v2"].loader(_folder(name))
    assert classifier.encoder.config.pooler_activation == "tanh"  # the folder's pooler_hidden_act
    np.testing.assert_allclose(classifier(_inputs(name))["logits"], REFERENCE[f"{name}.logits"], atol=ATOL, rtol=1e-5)


def test_the_folders_settings_reach_the_encoder():
    v3, v2 = load_encoder(_folder("deberta_v3")), load_encoder(_folder("deberta_v2"))
    assert (v3.position_buckets, v3.relative_span(v3.config), v3.share_att_key) == (4, (8, 4), True)
    assert v3.stack.convolution is None and v3.stack.table.layer_norm is not None
    assert not v3.config.learned_positions and v3.config.type_vocab_size == 0
    assert (v2.position_buckets, v2.relative_span(v2.config), v2.share_att_key) == (0, (6, 6), False)
    assert v2.stack.convolution.kernel_size == 3 and v2.stack.table.layer_norm is None
    assert v2.config.learned_positions and v2.config.type_vocab_size == 2


def _tiny(**changes):
    sizes = dict(vocabulary_size=120, num_layers=2, hidden_size=16, num_heads=2, intermediate_size=24)
    return {**sizes, "max_sequence_length": 32, "position_buckets": 4, "max_relative_positions": 8, **changes}


@pytest.mark.parametrize(
    "changes",
    [{}, dict(conv_kernel_size=3, share_att_key=False, position_buckets=0, learned_positions=True, type_vocab_size=2)],
    ids=["v3", "v2_convolution"],
)
def test_the_encoder_passes_the_shared_encoder_test(changes):
    encoder, outputs = run_encoder_test(DebertaV2Encoder, _tiny(**changes))
    assert encoder.config.attention == "disentangled"


def test_attention_probabilities_come_out_for_probing():
    encoder = DebertaV2Encoder(**_tiny(), return_attention_scores=True)
    batch = {
        "token_ids": np.array([[2, 5, 7, 3, 0]], "int32"),
        "segment_ids": np.zeros((1, 5), "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
    }
    scores = encoder(batch)["attention_scores"]
    assert len(scores) == 2 and tuple(scores[0].shape) == (1, 2, 5, 5)
    np.testing.assert_allclose(np.asarray(scores[1])[0, :, :4].sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.asarray(scores[1])[0, :, :4, 4], 0.0, atol=1e-7)  # no weight on padding


def test_relative_position_table_layer():
    run_layer_test(
        RelativePositionTable,
        {"rows": 8, "hidden_size": 6},
        {"inputs": np.zeros((2, 3, 6), "float32")},
        (1, 8, 6),
        symbolic_output_shape=(1, 8, 6),
    )


def test_residual_convolution_layer():
    rng = np.random.default_rng(0)
    mask = np.ones((2, 5), "int32")
    mask[1, 3:] = 0
    run_layer_test(
        ResidualConvolution,
        {"kernel_size": 3, "groups": 2},
        {
            "inputs": rng.normal(size=(2, 5, 6)).astype("float32"),
            "residual": rng.normal(size=(2, 5, 6)).astype("float32"),
            "padding_mask": mask,
        },
        (2, 5, 6),
    )


def test_residual_convolution_is_its_definition():
    """LN(residual + tanh(conv(x))) at real tokens, with the convolution's outputs at padding
    zeroed before the activation and the output zero there; checked against NumPy."""
    rng = np.random.default_rng(1)
    x, residual = rng.normal(size=(1, 4, 2)).astype("float32"), rng.normal(size=(1, 4, 2)).astype("float32")
    mask = np.array([[1, 1, 1, 0]], "int32")
    layer = ResidualConvolution(3, layer_norm_epsilon=1e-6)
    layer(x, residual, mask)
    kernel, bias = (np.asarray(w) for w in layer.convolution.get_weights())  # [3, 2, 2], [2]
    padded = np.pad(x[0], ((1, 1), (0, 0)))
    convolved = np.stack([sum(padded[t + k] @ kernel[k] for k in range(3)) + bias for t in range(4)])
    added = residual[0] + np.tanh(convolved * mask[0, :, None])
    expected = (added - added.mean(-1, keepdims=True)) / np.sqrt(added.var(-1, keepdims=True) + 1e-6)
    expected *= mask[0, :, None]
    np.testing.assert_allclose(np.asarray(layer(x, residual, mask))[0], expected, atol=1e-5)


def test_preset_sizes_equal_transformers_parameter_counts():
    """deberta-v3-xsmall's parameters as transformers' `DebertaV2Model` counts them for the published
    config (70,682,112: 22M in the layers, 49M in the 128,100-piece table), plus our pooler's."""
    encoder = DebertaV2Encoder.from_preset("deberta_v3_xsmall")
    pooler = sum(int(np.prod(w.shape)) for w in encoder.pooler.weights)
    assert encoder.count_params() - pooler == 70_682_112


def _config_with(tmp_path, **changes):
    folder = tmp_path / "folder"
    folder.mkdir()
    with open(os.path.join(_folder("deberta_v3"), "config.json")) as f:
        config = {**json.load(f), **changes}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "model.safetensors").write_bytes(
        open(os.path.join(_folder("deberta_v3"), "model.safetensors"), "rb").read()
    )
    return str(folder)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"relative_attention": False}, "relative_attention"),
        ({"pos_att_type": ["c2p", "p2p"]}, "pos_att_type"),
        ({"conv_kernel_size": 2}, "odd kernel_size"),
        ({"embedding_size": 16}, "embedding_size"),
        ({"position_buckets": "4"}, "position_buckets must be an integer"),
    ],
)
def test_bad_configs_are_refused_by_name(tmp_path, changes, message):
    with pytest.raises(ValueError, match=message):
        load_encoder(_config_with(tmp_path, **changes))


def test_disentangled_attention_alone_names_its_encoder():
    from bertlayers.networks import BertEncoder

    sizes = dict(vocabulary_size=50, num_layers=1, hidden_size=8, num_heads=2, intermediate_size=8)
    with pytest.raises(ValueError, match="architecture 'deberta_v2'"):
        BertEncoder(**sizes, attention="disentangled")


def deberta_folder(fixture, folder):
    """A deberta-v2 checkpoint folder: the fixture's weights, and an spm.model with its
    tokenizer_config.json as the published folders ship them (trained on the Wikipedia excerpt)."""
    import shutil

    from subword_files import write_tokenizer_folder

    tokenizer = write_tokenizer_folder(folder + "_tokenizer", "deberta-v2")
    shutil.copytree(_folder(fixture), folder)
    for name in ("spm.model", "tokenizer_config.json"):
        shutil.copy(os.path.join(tokenizer, name), folder)
    return folder


@pytest.mark.slow
@pytest.mark.tensorflow_only
def test_a_folder_fine_tunes_and_serves_text_and_ids_equal_to_keras(tmp_path):
    """The v3 folder (spm.model inside) fine-tuned on real Rotten Tomatoes snippets, saved, loaded and
    exported as text-in and ids-in SavedModels: their answers in a fresh process without Keras equal
    the Keras model's, and the text model's graph holds only ops TF Serving links."""
    import keras
    from processes import python, run
    from test_modern_checkpoints import SERVE_IDS_AND_TEXT

    from bertlayers.convert import load_checkpoint, load_model_file, save_model
    from bertlayers.export import export_for_serving
    from bertlayers.models import SequenceClassifier
    from bertlayers.utils.assets import rotten_tomatoes_snippets

    snippets = rotten_tomatoes_snippets()
    train, check = snippets[:32], [text for text, _ in snippets[1000:1008]]
    checkpoint = load_checkpoint(deberta_folder("deberta_v3", str(tmp_path / "deberta")))
    x = checkpoint.tokenizer.encode([text for text, _ in train], sequence_length=48)
    y = np.array([label == "fresh" for _, label in train], "int32")
    keras.utils.set_random_seed(0)
    model = SequenceClassifier(checkpoint.encoder, 2, label_names=["rotten", "fresh"])
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    losses = model.fit(x, {"logits": y}, batch_size=16, epochs=4, verbose=0).history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0], losses
    save_model(model, str(tmp_path / "deberta.keras"))
    loaded = load_model_file(str(tmp_path / "deberta.keras"))
    paths = export_for_serving(
        loaded, "deberta", base_dir=str(tmp_path / "savedmodels"), sequence_length=48, truncate=True
    )
    packed = checkpoint.tokenizer.encode(check, sequence_length=48)
    expected = loaded.predict(packed, verbose=0)["logits"]
    ids = {"deberta": {key: np.asarray(value).tolist() for key, value in packed.items()}}
    served = {"deberta": [paths["deberta_text"], paths["deberta"]]}
    answers = json.loads(
        run(python(SERVE_IDS_AND_TEXT) + [json.dumps(check), json.dumps(served), json.dumps(ids)]).stdout.splitlines()[
            -1
        ]
    )
    text_answer, ids_answer = answers["deberta"]
    np.testing.assert_allclose(np.array(text_answer), expected, atol=1e-4)
    np.testing.assert_allclose(np.array(ids_answer), expected, atol=1e-4)
    # The text model's graph: only ops a stock TF Serving links (its tensorflow-text kernels included).
    import tensorflow as tf
    from test_export import FORBIDDEN, graph_ops
    from test_subword_checkpoints import SERVING_TF_TEXT_OPS

    graph = graph_ops(paths["deberta_text"])
    assert not graph & FORBIDDEN
    assert not graph - set(dir(tf.raw_ops)) - SERVING_TF_TEXT_OPS, sorted(graph - set(dir(tf.raw_ops)))

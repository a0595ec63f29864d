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
from bertlayers.families.deberta_v2 import DebertaV2Encoder, RelativePositionTable, ResidualConvolution
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


@pytest.mark.other_backend_cases("deberta_v2", "deberta_v3")  # v2's convolution and own projections; v3's buckets
@pytest.mark.parametrize("name", MASKED_LM + ["deberta_v3_classifier"])
def test_folders_give_transformers_hidden_states_at_every_layer(name):
    inputs = _inputs(name)
    outputs = load_encoder(_folder(name))(inputs)
    layers = REFERENCE[f"{name}.layers"]  # [L + 1, B, S, H]: the embeddings, then each layer
    _close_at_real_tokens(outputs["embedding_output"], layers[0], inputs["padding_mask"])
    for depth, state in enumerate(outputs["encoder_outputs"]):
        _close_at_real_tokens(state, layers[depth + 1], inputs["padding_mask"])
    _close_at_real_tokens(outputs["sequence_output"], REFERENCE[f"{name}.hidden"], inputs["padding_mask"])


@pytest.mark.other_backend_cases("deberta_v3")
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
    [
        {},
        pytest.param(  # the v3 case takes the encoder check in the fast tier
            dict(
                conv_kernel_size=3, share_att_key=False, position_buckets=0, learned_positions=True, type_vocab_size=2
            ),
            marks=pytest.mark.slow(reason="the encoder check on v2's settings, 6 s"),
        ),
    ],
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


@pytest.mark.other_backend_cases()  # counting parameters takes no backend-specific path
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
    from bertlayers.families.bert import BertEncoder

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


@pytest.mark.slow(reason="fine-tunes, exports and serves a DeBERTa-v3 folder")
@pytest.mark.tensorflow_only
def test_a_folder_fine_tunes_and_serves_text_and_ids_equal_to_keras(tmp_path):
    """`run_classifier.py --init FOLDER` on the v3 folder (spm.model inside) and real Rotten Tomatoes
    snippets: the model it writes records the folder's tokenizer files, which tokenize as the folder
    does; loaded and exported as text-in and ids-in SavedModels, their answers in a fresh process
    without Keras equal the Keras model's, and the text model's graph holds only ops TF Serving links."""
    import csv

    from processes import run_script
    from test_modern_checkpoints import serve_text_and_ids

    from bertlayers.convert import load_model_file
    from bertlayers.convert.model_files import recorded_tokenizer
    from bertlayers.export import export_for_serving
    from bertlayers.tokenizers import checkpoint_tokenizer
    from bertlayers.utils.assets import rotten_tomatoes_snippets

    snippets = rotten_tomatoes_snippets()
    for file, rows in (("train.csv", snippets[:32]), ("eval.csv", snippets[2000:2016])):
        with open(tmp_path / file, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([("text", "label"), *rows])
    folder, out = deberta_folder("deberta_v3", str(tmp_path / "deberta")), tmp_path / "sentiment"
    run_script(
        "run_classifier.py",
        *("--init", folder, "--train_file", tmp_path / "train.csv", "--eval_file", tmp_path / "eval.csv"),
        *("--output_dir", out, "--epochs", 4, "--batch_size", 16, "--sequence_length", 48),
        *("--learning_rate", 1e-3, "--verbose", 0),
    )
    assert json.load(open(out / "metrics.json"))["eval_examples"] == 16
    losses = [epoch["loss"] for epoch in json.load(open(out / "history.json"))]
    assert np.isfinite(losses).all() and losses[-1] < losses[0], losses
    loaded = load_model_file(str(out / "model.keras"))
    recorded = recorded_tokenizer(loaded)
    assert recorded.model_type == "deberta-v2" and "spm.model" in dict(recorded.files)
    check = [text for text, _ in snippets[1000:1008]]
    ours, theirs = recorded.in_graph(), checkpoint_tokenizer(folder)
    np.testing.assert_array_equal(
        ours.encode(check, sequence_length=48)["token_ids"], theirs.encode(check, sequence_length=48)["token_ids"]
    )
    paths = export_for_serving(
        loaded, "deberta", base_dir=str(tmp_path / "savedmodels"), sequence_length=48, truncate=True
    )
    packed = theirs.encode(check, sequence_length=48)
    expected = loaded.predict(packed, verbose=0)["logits"]
    text_answer, ids_answer = serve_text_and_ids(paths["deberta_text"], paths["deberta"], check, packed, tmp_path)
    np.testing.assert_allclose(text_answer, expected, atol=1e-4)
    np.testing.assert_allclose(ids_answer, expected, atol=1e-4)
    # The text model's graph: only ops a stock TF Serving links (its tensorflow-text kernels included).
    import tensorflow as tf
    from test_export import FORBIDDEN, graph_ops
    from test_subword_checkpoints import SERVING_TF_TEXT_OPS

    graph = graph_ops(paths["deberta_text"])
    assert not graph & FORBIDDEN
    assert not graph - set(dir(tf.raw_ops)) - SERVING_TF_TEXT_OPS, sorted(graph - set(dir(tf.raw_ops)))


# --- Pretraining: replaced-token detection with gradient-disentangled embedding sharing ---


def _tiny_pretrainer(sharing):
    from bertlayers.families.deberta_v2 import DebertaV3Pretrainer, deberta_v3_config, deberta_v3_encoders

    config = deberta_v3_config(2, 16, 2, 32, vocabulary_size=60, max_sequence_length=16)
    discriminator, generator = deberta_v3_encoders(config, 0.5, sharing, position_buckets=4, max_relative_positions=8)
    return DebertaV3Pretrainer(discriminator, generator)


def _pretrainer_inputs():
    rng = np.random.default_rng(0)
    return {
        "token_ids": rng.integers(5, 60, (2, 10)).astype("int32"),
        "segment_ids": np.zeros((2, 10), "int32"),
        "padding_mask": np.array([[1] * 10, [1] * 7 + [0] * 3], "int32"),
        "masked_positions": np.array([[1, 3], [2, 4]], "int32"),
        "masked_lm_ids": np.array([[7, 8], [9, 10]], "int32"),
        "masked_lm_weights": np.ones((2, 2), "float32"),
        "sample_seed": np.array([[1, 2], [3, 4]], "int32"),
    }


def test_the_generator_is_as_wide_with_half_the_layers():
    model = _tiny_pretrainer("disentangled")
    assert model.generator.config.num_layers == 1 and model.encoder.config.num_layers == 2
    assert model.generator.config.hidden_size == model.encoder.config.hidden_size == 16
    # The discriminator's own table is the difference alone; the generator's is not its weight.
    own = {id(w) for w in model.encoder.weights}
    assert id(model.generator.token_embedding.embeddings) not in own


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("sharing", ["disentangled", "shared"])
def test_each_loss_reaches_the_table_the_sharing_says(sharing):
    """GDES (He et al. 2023, eq. 5): E_D = sg(E_G) + E_Δ, so the RTD loss trains E_Δ and never E_G,
    the MLM loss E_G and never E_Δ; plain sharing: the RTD loss reaches E_G too."""
    import tensorflow as tf

    model = _tiny_pretrainer(sharing)
    x = _pretrainer_inputs()
    with tf.GradientTape(persistent=True) as tape:
        outputs = model(x, training=True)
        model.discriminator_weight = 0.0
        mlm_loss = model.compute_loss(x, None, outputs)
        model.discriminator_weight = 1.0
        rtd_loss = model.compute_loss(x, None, outputs) - mlm_loss

    def reaches(loss, variable):
        gradient = tape.gradient(loss, variable)
        return gradient is not None and bool(np.any(np.asarray(tf.convert_to_tensor(gradient))))

    generator_table = model.generator.token_embedding.embeddings
    assert reaches(mlm_loss, generator_table)
    if sharing == "disentangled":
        difference = model.encoder.embeddings.token_embedding.difference
        assert reaches(rtd_loss, difference) and not reaches(mlm_loss, difference)
        assert not reaches(rtd_loss, generator_table)
    else:
        assert model.encoder.embeddings.token_embedding is model.generator.embeddings.token_embedding
        assert reaches(rtd_loss, generator_table)


def test_the_finished_encoder_holds_the_folded_table_and_computes_the_same(tmp_path):
    import keras

    from bertlayers.layers import BertEmbeddings

    model = _tiny_pretrainer("disentangled")
    difference = model.encoder.embeddings.token_embedding.difference
    difference.assign(np.random.default_rng(2).normal(0, 0.5, difference.shape).astype("float32"))
    x = _pretrainer_inputs()
    inputs = {key: x[key] for key in ("token_ids", "segment_ids", "padding_mask")}
    finished = model.finished_encoder()
    assert type(finished.embeddings) is BertEmbeddings
    np.testing.assert_allclose(
        np.asarray(finished.token_embedding.embeddings),
        np.asarray(model.generator.token_embedding.embeddings) + np.asarray(difference),
        atol=1e-7,
    )
    expected = np.asarray(model.encoder(inputs)["sequence_output"])
    np.testing.assert_allclose(np.asarray(finished(inputs)["sequence_output"]), expected, atol=1e-5)
    # The pretrainer saves and loads whole (the discriminator reading the generator's table again).
    model.save(str(tmp_path / "pretrainer.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "pretrainer.keras"), safe_mode=True)
    assert loaded.encoder.embeddings.source is loaded.generator.embeddings
    np.testing.assert_allclose(np.asarray(loaded(x)["rtd"]), np.asarray(model(x)["rtd"]), atol=1e-5)


def test_a_discriminator_saved_without_its_generator_is_refused_by_name(tmp_path):
    import keras

    model = _tiny_pretrainer("disentangled")
    model.encoder.save(str(tmp_path / "encoder.keras"))
    with pytest.raises(Exception, match="finished_encoder"):
        keras.saving.load_model(str(tmp_path / "encoder.keras"), safe_mode=True)


def test_recipe_options_are_typed_and_checked():
    from bertlayers.families.recipes import get_recipe

    recipe = get_recipe("deberta_v3")
    assert recipe.resolved_options({"embedding_sharing": " es "})["embedding_sharing"] == "es"
    with pytest.raises(ValueError, match="embedding_sharing .* must be one of gdes, es, got 'nes'"):
        recipe.resolved_options({"embedding_sharing": "nes"})
    with pytest.raises(ValueError, match="generator_depth"):
        recipe.resolved_options({"generator_depth": "0"})


@pytest.fixture(scope="module")
def deberta_run(corpus, tmp_path_factory):
    from pretraining_fixtures import tiny_family_run

    return tiny_family_run(corpus, tmp_path_factory, "deberta_v3")


@pytest.mark.tensorflow_only
def test_tiny_deberta_v3_learns_on_real_text_and_saves_the_folded_discriminator(deberta_run):
    import keras
    from pretraining_fixtures import check_run_encoder

    from bertlayers.families.deberta_v2 import DebertaV3Pretrainer

    _, output, summary = deberta_run
    assert summary["steps"] == 60
    assert summary["last_epoch_mlm_loss"] < summary["initial_mlm_loss"] - 0.5, summary
    initial = json.load(open(output / "initial_loss.json"))
    assert summary["last_epoch_rtd_loss"] < initial["rtd_loss"] - 0.1, (initial, summary)
    pretrainer = keras.saving.load_model(str(output / "pretrainer.keras"), safe_mode=True)
    assert isinstance(pretrainer, DebertaV3Pretrainer)
    assert pretrainer.encoder.embeddings.source is pretrainer.generator.embeddings
    assert np.any(np.asarray(pretrainer.encoder.embeddings.token_embedding.difference))  # E_Δ trained
    check_run_encoder(output, pretrainer, DebertaV2Encoder)


@pytest.mark.parametrize("name", MASKED_LM + ["deberta_v3_classifier"])
def test_a_folder_saved_back_holds_what_transformers_wrote(name, tmp_path):
    """`save_huggingface`: the same tensors under the same names and the same config values as
    transformers' own folder (the `lm_predictions` head written in the legacy `cls.predictions`
    layout, which the config then says), so transformers loads it as its own; loaded back here,
    transformers' outputs."""
    from safetensors.numpy import load_file

    from bertlayers.convert import save_huggingface
    from bertlayers.convert.model_files import _ATTRIBUTE
    from bertlayers.tokenizers import ModelTokenizer

    source = _folder(name)
    with open(os.path.join(source, "config.json")) as f:
        config = json.load(f)
    model = HUGGINGFACE_FAMILIES["deberta-v2"].loader(source)
    object.__setattr__(model, _ATTRIBUTE, ModelTokenizer((), "deberta-v2", pad_id=0))  # no tokenizer files here
    saved = save_huggingface(model, str(tmp_path / name))
    theirs, ours = (
        load_file(os.path.join(source, "model.safetensors")),
        load_file(os.path.join(saved, "model.safetensors")),
    )
    with open(os.path.join(saved, "config.json")) as f:
        written = json.load(f)
    if config.get("legacy", True):
        assert sorted(ours) == sorted(theirs)
        for key in theirs:
            np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)
    else:
        assert written["legacy"] is True and "cls.predictions.transform.dense.weight" in ours
    differs = {k: (config[k], v) for k, v in written.items() if k in config and config[k] != v and k != "legacy"}
    assert differs == {} and written["architectures"] == config["architectures"]
    reloaded = HUGGINGFACE_FAMILIES["deberta-v2"].loader(saved)
    inputs = _inputs(name)
    if name.endswith("classifier"):
        np.testing.assert_allclose(reloaded(inputs)["logits"], REFERENCE[f"{name}.logits"], atol=ATOL, rtol=1e-5)
    else:
        positions = np.tile(np.arange(12, dtype="int32"), (3, 1))
        logits = reloaded({**inputs, "masked_positions": positions})["mlm"]
        _close_at_real_tokens(logits, REFERENCE[f"{name}.logits"], inputs["padding_mask"])


def test_the_classifier_trains_and_reloads_over_its_context_pooler():
    """DeBERTa's classification, over its context pooler (act(W · x[CLS])), through the shared
    task-model test. The other heads read the sequence output as over any encoder (tagging, spans,
    multiple choice: test_refused_calls trains, saves and reloads each over BERT's); DeBERTa's
    sequence output is transformers' (the folder tests above)."""
    from bertlayers.models import SequenceClassifier
    from bertlayers.testing import encoder_batch, run_task_model_test

    encoder = DebertaV2Encoder(**_tiny())
    model = SequenceClassifier(encoder, 3)
    assert encoder.pooler.activation == "gelu"  # DeBERTa's ContextPooler
    run_task_model_test(model, encoder_batch(120), np.array([0, 1, 2]))


@pytest.mark.tensorflow_only
def test_a_classifier_serves_what_keras_computes():
    from bertlayers.models import SequenceClassifier
    from bertlayers.testing import check_served_equals_keras, encoder_batch

    model = SequenceClassifier(DebertaV2Encoder(**_tiny()), 3, dropout=0.0)
    served = check_served_equals_keras(model, encoder_batch(120), sequence_length=16)
    assert served["logits"].shape == (3, 3)

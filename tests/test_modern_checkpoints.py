"""ModernBERT, GTE, NomicBERT and EuroBERT checkpoints (encoder, MLM heads tied and untied, classifiers with
their pooling) against transformers' outputs for the same randomly initialized models
(tests/fixtures/record_modern_families.py): within 1e-5 in float32."""

import json
import os

import numpy as np
import pytest

from bertlayers.convert import load_encoder
from bertlayers.convert.huggingface import HUGGINGFACE_FAMILIES

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
REFERENCE = np.load(os.path.join(FIXTURES, "modern_families.npz"))
ATOL = 1e-5


def _folder(name):
    return os.path.join(FIXTURES, "modern_families", name)


def load_checkpoint_model(folder):
    """The folder's whole model (pretrainer or classifier), by its model_type's registered loader."""
    with open(os.path.join(folder, "config.json")) as f:
        return HUGGINGFACE_FAMILIES[json.load(f)["model_type"]].loader(folder)


def _inputs(name):
    return {key: REFERENCE[f"{name}.{key}"] for key in ("token_ids", "segment_ids", "padding_mask")}


def _close_at_real_tokens(ours, theirs, mask):
    real = mask.astype(bool)
    np.testing.assert_allclose(np.asarray(ours)[real], theirs[real], atol=ATOL, rtol=1e-5)


MASKED_LM = ["modernbert", "modernbert_biased_untied", "gte", "nomic_bert", "eurobert_untied", "eurobert_biased"]
CLASSIFIERS = [
    "modernbert_classifier",
    "modernbert_classifier_cls",
    "gte_classifier",
    "nomic_bert_classifier",
    "eurobert_classifier_late",
    "eurobert_classifier_mean",
    "eurobert_classifier_bos",
]


@pytest.mark.other_backend_cases("modernbert", "gte", "nomic_bert", "eurobert_untied")  # one a family's encoder
@pytest.mark.parametrize("name", MASKED_LM)
def test_masked_lm_folders_give_transformers_hidden_states_and_logits(name):
    inputs = _inputs(name)
    encoder = load_encoder(_folder(name))
    _close_at_real_tokens(encoder(inputs)["sequence_output"], REFERENCE[f"{name}.hidden"], inputs["padding_mask"])

    pretrainer = load_checkpoint_model(_folder(name))
    assert pretrainer.encoder.config.tie_word_embeddings == ("untied" not in name)
    positions = np.tile(np.arange(inputs["token_ids"].shape[1], dtype="int32"), (len(inputs["token_ids"]), 1))
    logits = pretrainer({**inputs, "masked_positions": positions})["mlm"]
    _close_at_real_tokens(logits, REFERENCE[f"{name}.logits"], inputs["padding_mask"])


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_classifier_folders_give_transformers_logits(name):
    inputs = _inputs(name)
    classifier = load_checkpoint_model(_folder(name))
    np.testing.assert_allclose(classifier(inputs)["logits"], REFERENCE[f"{name}.logits"], atol=ATOL, rtol=1e-5)
    if f"{name}.pooled" in REFERENCE:
        pooled = classifier.encoder(inputs)["pooled_output"]
        np.testing.assert_allclose(pooled, REFERENCE[f"{name}.pooled"], atol=ATOL, rtol=1e-5)


# Each model type's folder for the end-to-end tests: the fixture's weights, and a tokenizer.json of
# the kind its published folders ship, trained here at the fixture's vocabulary size. The decoders
# read as encoders come too: Qwen3 causal (its classifier reads the last real token), Gemma 3
# bidirectional (padded on the left, as GemmaTokenizer pads where the folder names no side). GTE
# is not among them: its encoder is NomicBERT's (BERT's post-norm blocks, rotary attention, the
# gated feed-forward; one more bias) with the same WordPiece tokenizer.json, so its exports' graphs
# hold the same ops; its outputs are transformers' in the folder tests above and test_layouts.
SERVED = {
    # name: (fixture, tokenizer.json kind, vocabulary size)
    "modernbert": ("modernbert", "modernbert", 2000),
    "nomic_bert": ("nomic_bert", "nomic_bert", 1000),
    "eurobert": ("eurobert_untied", "eurobert", 2000),
    "qwen3": ("../decoder_families/qwen3", "qwen3", 2000),
    "gemma3_text": ("../decoder_families/gemma3", "gemma3", 2000),
}


def serve_text_and_ids(text_path, ids_path, texts, packed, tmp_path):
    """The logits a text SavedModel gives `texts` and its ids SavedModel gives their `packed` ids, each
    served in a Python without Keras (`fresh_serving`)."""
    from fresh_serving import run_fresh

    text = run_fresh(text_path, "serving_default", {"text": np.array(texts)}, tmp_path, text=True)
    ids = run_fresh(
        ids_path, "serving_default", {k: np.asarray(v, "int32") for k, v in packed.items()}, tmp_path, text=False
    )
    return text["logits"], ids["logits"]


def modern_folder(name, folder):
    """A checkpoint folder of model type `name`: config.json, model.safetensors, tokenizer.json."""
    import shutil

    from subword_files import write_tokenizer_json

    fixture, kind, size = SERVED[name]
    shutil.copytree(_folder(fixture), folder)
    write_tokenizer_json(os.path.join(folder, "tokenizer.json"), kind, vocab_size=size)
    return folder


@pytest.fixture(scope="module")
def served_models(tmp_path_factory):
    """Each model type: a classifier fine-tuned by `run_classifier.py --init FOLDER` on real Rotten
    Tomatoes snippets (the folder's only tokenizer file its tokenizer.json), its saved model loaded
    and exported (text and ids)."""
    import csv

    from processes import run_script

    from bertlayers.convert import load_checkpoint, load_model_file
    from bertlayers.export import export_for_serving
    from bertlayers.utils.assets import rotten_tomatoes_snippets

    root = tmp_path_factory.mktemp("modern")
    snippets = rotten_tomatoes_snippets()
    for file, rows in (("train.csv", snippets[:32]), ("eval.csv", snippets[2000:2016])):
        with open(root / file, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([("text", "label"), *rows])
    check = [text for text, _ in snippets[1000:1008]]
    results = {}
    for name in SERVED:
        folder, run = modern_folder(name, str(root / name)), root / f"{name}_run"
        run_script(
            "run_classifier.py", "--init", folder, "--train_file", root / "train.csv", "--eval_file",
            root / "eval.csv", "--output_dir", run, "--epochs", 4, "--batch_size", 16, "--sequence_length", 48,
            "--learning_rate", 1e-3, "--verbose", 0,
        )  # fmt: skip
        loaded = load_model_file(str(run / "model.keras"))
        paths = export_for_serving(loaded, name, base_dir=str(root / "savedmodels"), sequence_length=48, truncate=True)
        packed = load_checkpoint(folder).tokenizer.encode(check, sequence_length=48)
        expected = loaded.predict(packed, verbose=0)["logits"]
        losses = [epoch["loss"] for epoch in json.load(open(run / "history.json"))]
        results[name] = ((paths[name + "_text"], paths[name]), packed, expected, losses, folder, run)
    return check, results


@pytest.mark.slow
@pytest.mark.tensorflow_only
def test_each_model_type_fine_tunes_and_serves_text_and_ids_from_its_folder(served_models, tmp_path):
    check, results = served_models
    for name, (_, _, _, losses, _, _) in results.items():
        assert np.isfinite(losses).all() and losses[-1] < losses[0], (name, losses)
    for name, ((text_path, ids_path), packed, expected, *_) in results.items():
        served = serve_text_and_ids(text_path, ids_path, check, packed, tmp_path)
        for answer in served:
            np.testing.assert_allclose(answer, expected, atol=1e-4, err_msg=name)


@pytest.mark.slow
@pytest.mark.tensorflow_only
def test_every_model_type_text_model_uses_only_ops_tf_serving_links(served_models):
    import tensorflow as tf
    from test_export import FORBIDDEN, graph_ops
    from test_subword_checkpoints import SERVING_TF_TEXT_OPS

    _, results = served_models
    core = set(dir(tf.raw_ops))
    for name, ((path, _), *_) in results.items():
        ops = graph_ops(path)
        assert not ops & FORBIDDEN, name
        assert not ops - core - SERVING_TF_TEXT_OPS, (name, sorted(ops - core - SERVING_TF_TEXT_OPS))


@pytest.mark.slow
@pytest.mark.tensorflow_only
def test_run_classifier_fine_tunes_from_each_folder_with_its_tokenizer_json(served_models):
    """`--init FOLDER` with a folder whose only tokenizer file is tokenizer.json: the run's model
    records that tokenizer, which pads as the folder's config says."""
    from bertlayers.convert import load_model_file
    from bertlayers.convert.model_files import recorded_tokenizer
    from bertlayers.tokenizers import checkpoint_tokenizer

    for name, (*_, folder, run) in served_models[1].items():
        assert json.load(open(run / "metrics.json"))["eval_examples"] == 16, name
        recorded = recorded_tokenizer(load_model_file(str(run / "model.keras")))
        assert recorded.model_type == json.load(open(os.path.join(folder, "config.json")))["model_type"]
        assert "tokenizer.json" in dict(recorded.files)
        assert recorded.in_graph().layout == checkpoint_tokenizer(folder).layout, name


@pytest.mark.slow
@pytest.mark.tensorflow_only
def test_a_bert_folder_with_only_tokenizer_json_tokenizes_and_serves_text(tmp_path):
    """The BERT-architecture folders published with a tokenizer.json and no vocab.txt."""
    import shutil

    import tensorflow as tf
    from subword_files import write_tokenizer_json
    from tokenizers import Tokenizer

    from bertlayers.convert import load_checkpoint
    from bertlayers.export import export_for_serving
    from bertlayers.models import SequenceClassifier
    from bertlayers.testing import check_served_equals_keras

    folder = str(tmp_path / "bert")
    shutil.copytree(os.path.join(FIXTURES, "subword_families", "bert_classifier"), folder)
    write_tokenizer_json(os.path.join(folder, "tokenizer.json"), "nomic_bert", vocab_size=1000)
    assert not os.path.exists(os.path.join(folder, "vocab.txt"))
    checkpoint = load_checkpoint(folder)
    texts = ["A film of great charm.", "Dull, and far too long."]
    reference = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    packed = checkpoint.tokenizer.encode(texts, sequence_length=16)
    for row, text in enumerate(texts):
        ids = reference.encode(text).ids
        assert packed["token_ids"][row][: len(ids)].tolist() == ids
    model = checkpoint.model
    assert isinstance(model, SequenceClassifier)
    check_served_equals_keras(model, packed, sequence_length=16)
    paths = export_for_serving(model, "bert", base_dir=str(tmp_path / "savedmodels"), sequence_length=16)
    served = tf.saved_model.load(paths["bert_text"]).signatures["serving_default"](text=tf.constant(texts))
    np.testing.assert_allclose(served["logits"].numpy(), model.predict(packed, verbose=0)["logits"], atol=1e-4)


@pytest.mark.slow
@pytest.mark.tensorflow_only
def test_every_rotary_model_types_ids_model_converts_to_tflite_with_the_keras_outputs(served_models, tmp_path):
    """TFLite runs each model type's ids SavedModel (rotary attention, ModernBERT's sliding window)
    on builtin ops, and answers what the Keras model computes."""
    from bertlayers.export import export_tflite, tflite_interpreter

    _, results = served_models
    for name, ((_, ids_path), packed, expected, *_) in results.items():
        runner = tflite_interpreter(export_tflite(ids_path, str(tmp_path / f"{name}.tflite"))).get_signature_runner()
        answer = runner(**{k: np.asarray(v, "int32") for k, v in packed.items()})["logits"]
        np.testing.assert_allclose(answer, expected, atol=1e-4, err_msg=name)

"""SavedModels for TF Serving, proven without a TF Serving binary (none installs here):
a fresh process without Keras or bertlayers loads them, saved_model_cli shows and runs them,
every graph op is one TF Serving 2.20 links, and PredictRequests map onto the signatures."""

import contextlib
import json
import os
import re
import signal
import sys

import numpy as np
import pytest
import tensorflow as tf
from fresh_serving import poisoned_path, run_fresh
from keras_hub_reference import keras_hub_packer
from processes import REPO, environment, python, run, script

from bertlayers import backend
from bertlayers.export import export_for_serving
from bertlayers.families.bert import BertEncoder
from bertlayers.models import SequenceClassifier, SpanPredictor, TokenClassifier
from bertlayers.task_data.squad import SquadExample, decode_answers, make_windows, read_squad
from bertlayers.tokenizers import bert_uncased_vocabulary, model_tokenizer

SEQ = 32
TINY = dict(
    vocabulary_size=30522, num_layers=2, hidden_size=32, num_heads=2, intermediate_size=64, max_sequence_length=64
)
# tensorflow-text ops that TF Serving 2.20 links (its bundled tf-text 2.20 ops_lib) and that the
# text signatures use. Everything else must be a core TensorFlow op.
TF_TEXT_OPS = {"FastBertNormalize", "RegexSplitWithOffsets", "FastWordpieceTokenizeWithOffsets"}
FORBIDDEN = {"RoundRobinTrim", "RoundRobinGenerateMasks"}
TEXTS = ["The quick brown fox jumps over the lazy dog.", "Zürich's café—open late!"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    base = tmp_path_factory.mktemp("savedmodels")
    encoder = BertEncoder(**TINY, name="encoder")
    models = {
        "encoder": encoder,
        "classifier": SequenceClassifier(encoder, 3),
        "squad": SpanPredictor(encoder),
        "tagger": TokenClassifier(encoder, 5),
        "crf_tagger": TokenClassifier(encoder, 5, crf=True),
    }
    # Transitions strong enough that the Viterbi path differs from each token's best tag.
    crf = models["crf_tagger"].crf
    crf.transitions.assign(3 * np.random.default_rng(5).normal(size=(5, 5)).astype("float32"))
    paths = {}
    with converted_calls() as converted:
        for name, model in models.items():
            paths.update(
                export_for_serving(
                    model, name, base_dir=str(base), vocabulary=bert_uncased_vocabulary(), sequence_length=SEQ
                )
            )
    # The signatures are graph ops already: autograph's conversion of everything beneath them
    # (source parsed and rewritten) was half a first export's time.
    assert not converted, f"exported with autograph: {converted[:5]}"
    return base, models, paths


@contextlib.contextmanager
def converted_calls():
    """The library's functions autograph converts while the block runs (`tf.function`s traced
    with autograph on call them through `converted_call`)."""
    from tensorflow.python.autograph.impl import api

    converted, original = [], api.converted_call

    def recording(f, *args, **kwargs):
        if (getattr(f, "__module__", None) or "").startswith("bertlayers"):
            converted.append(f"{f.__module__}.{getattr(f, '__qualname__', f)}")
        return original(f, *args, **kwargs)

    api.converted_call = recording
    try:
        yield converted
    finally:
        api.converted_call = original


def id_inputs(batch=2, length=SEQ):
    rng = np.random.default_rng(0)
    token_ids = np.zeros((batch, length), "int32")
    token_ids[:, 0], token_ids[:, 1:12] = 101, rng.integers(1000, 2000, size=(batch, 11))
    token_ids[:, 12], token_ids[:, 13:20], token_ids[:, 20] = 102, rng.integers(1000, 2000, size=(batch, 7)), 102
    segment_ids = np.zeros_like(token_ids)
    segment_ids[:, 13:21] = 1
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": (token_ids != 0).astype("int32")}


def keras_outputs(model, inputs):
    """The Keras model's own outputs, computed in graph mode like the SavedModel."""
    return {k: np.asarray(v) for k, v in model.predict(inputs, verbose=0).items()}


@pytest.mark.parametrize("length", [SEQ, 21])  # 21: shorter than exported: the model runs at its length
@pytest.mark.parametrize("name", ["encoder", "classifier", "tagger", "crf_tagger", "squad"])
def test_ids_model_loads_without_keras_and_matches(exported, tmp_path, name, length):
    base, models, paths = exported
    inputs = id_inputs(length=length)
    served = run_fresh(paths[name], "serving_default", inputs, tmp_path, text=False)
    model = models[name]
    if name == "squad":
        expected = keras_outputs(model, {**inputs, "span_mask": served_span_mask(inputs)})
    else:
        expected = keras_outputs(model, inputs)
    if name == "encoder":
        pairs = {"pooled_output": "pooled_output", "sequence_output": "sequence_output"}
    elif name == "squad":
        pairs = {"start_logits": "start_logits", "end_logits": "end_logits"}
    else:
        pairs = {"logits": "logits"}
    for served_key, keras_key in pairs.items():
        np.testing.assert_allclose(served[served_key], expected[keras_key], atol=1e-5)
    if name == "classifier":
        np.testing.assert_array_equal(served["label"], expected["logits"].argmax(-1))
        np.testing.assert_allclose(served["probabilities"].sum(-1), 1.0, atol=1e-5)
    if name == "tagger":
        np.testing.assert_array_equal(served["tags"], expected["logits"].argmax(-1))
    if name == "crf_tagger":  # the served tags are the Viterbi path, not each token's best tag
        real = inputs["padding_mask"] == 1
        np.testing.assert_array_equal(served["tags"], expected["tags"])
        assert (served["tags"][real] != expected["logits"].argmax(-1)[real]).any()


def served_span_mask(inputs):
    """The span mask the ids signature derives: [CLS] and the second segment without its [SEP]."""
    context = (inputs["segment_ids"] == 1) & (inputs["padding_mask"] == 1)
    mask = context & np.concatenate([context[:, 1:], np.zeros_like(context[:, :1])], axis=1)
    mask[:, 0] = True
    return mask.astype("int32")


def test_optional_inputs_are_derived(exported, tmp_path):
    _, models, paths = exported
    inputs = id_inputs()
    inputs["segment_ids"][:] = 0
    full = run_fresh(paths["encoder"], "serving_default", inputs, tmp_path, text=False)
    only_ids = run_fresh(paths["encoder"], "token_ids_only", {"token_ids": inputs["token_ids"]}, tmp_path, text=False)
    np.testing.assert_allclose(only_ids["pooled_output"], full["pooled_output"], atol=1e-6)


def test_text_model_tokenizes_in_the_graph(exported, tmp_path):
    _, models, paths = exported
    served = run_fresh(paths["classifier_text"], "serving_default", {"text": np.array(TEXTS)}, tmp_path, text=True)
    packed = keras_hub_packer(bert_uncased_vocabulary(), SEQ)(TEXTS)
    np.testing.assert_allclose(served["logits"], keras_outputs(models["classifier"], packed)["logits"], atol=1e-5)
    pair = run_fresh(
        paths["classifier_text"],
        "text_pair",
        {"text_a": np.array(TEXTS), "text_b": np.array(["yes", "no"])},
        tmp_path,
        text=True,
    )
    packed = keras_hub_packer(bert_uncased_vocabulary(), SEQ)(TEXTS, ["yes", "no"])
    np.testing.assert_allclose(pair["logits"], keras_outputs(models["classifier"], packed)["logits"], atol=1e-5)


def test_squad_text_model_decodes_answers_in_the_graph(exported, tmp_path):
    _, models, paths = exported
    examples = [e for e in read_squad(os.path.join(REPO, "examples", "data", "squad_mini", "dev-v2.0.json"))][:6]
    contexts = [" ".join(e.context.split()[:12]) for e in examples]  # one window each
    served = run_fresh(
        paths["squad_text"],
        "serving_default",
        {"question": np.array([e.question for e in examples]), "context": np.array(contexts)},
        tmp_path,
        text=True,
    )
    short = [SquadExample(e.qid, e.question, c, [], True) for e, c in zip(examples, contexts)]
    features = make_windows(
        short, model_tokenizer(bert_uncased_vocabulary()).in_graph(), sequence_length=SEQ, max_query_length=64
    )
    assert len(features.example_index) == len(short)
    predictions, _ = decode_answers(short, features, served["start_logits"], served["end_logits"], n_best_size=SEQ)
    for i, example in enumerate(short):
        text = served["answer_text"][i].decode("utf-8")
        assert text == predictions[example.qid]
        assert example.context[served["answer_start"][i] : served["answer_end"][i]] == text


def test_saved_model_cli_shows_and_runs(exported, tmp_path):
    _, _, paths = exported
    # TensorFlow's console script, run by this Python (so forked from the zygote, TensorFlow loaded).
    cli = [sys.executable, os.path.join(os.path.dirname(sys.executable), "saved_model_cli")]
    shown = run([*cli, "show", "--dir", paths["encoder"], "--all"], timeout=120).stdout
    for name in ("token_ids", "segment_ids", "padding_mask"):
        assert (
            f"inputs['{name}'] tensor_info:\n        dtype: DT_INT32\n        shape: (-1, -1)" in shown
        )  # any length up to SEQ
    assert "outputs['pooled_output']" in shown and "outputs['sequence_output']" in shown
    assert "signature_def['token_ids_only']" in shown
    for name, value in id_inputs(batch=1).items():
        np.save(tmp_path / f"{name}.npy", value)
    given = ";".join(f"{n}={tmp_path / (n + '.npy')}" for n in ("token_ids", "segment_ids", "padding_mask"))
    ran = run(
        [
            *cli,
            "run",
            "--dir",
            paths["encoder"],
            "--tag_set",
            "serve",
            "--signature_def",
            "serving_default",
            "--inputs",
            given,
        ],
        timeout=120,
    )
    assert "pooled_output" in ran.stdout, ran.stderr[-2000:]


def graph_ops(path):
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString(open(os.path.join(path, "saved_model.pb"), "rb").read())
    ops = set()
    for meta in proto.meta_graphs:
        ops |= {node.op for node in meta.graph_def.node}
        for function in meta.graph_def.library.function:
            ops |= {node.op for node in function.node_def}
    return ops


def test_every_op_is_one_tf_serving_links(exported):
    _, _, paths = exported
    core = set(dir(tf.raw_ops))
    for name, path in paths.items():
        ops = graph_ops(path)
        assert not ops & FORBIDDEN
        unknown = ops - core - TF_TEXT_OPS
        assert not unknown, f"{name} uses ops TF Serving 2.20 does not link: {sorted(unknown)}"
        if not name.endswith("_text"):
            assert not ops & TF_TEXT_OPS, f"{name}: the ids model must load in any TF Serving"
    assert {"FastBertNormalize", "FastWordpieceTokenizeWithOffsets"} <= graph_ops(paths["classifier_text"])


def test_predict_requests_map_onto_the_signatures(exported):
    from tensorflow_serving.apis import predict_pb2

    _, _, paths = exported
    for name, signature, inputs in (
        ("encoder", "serving_default", id_inputs()),
        ("classifier_text", "text_pair", {"text_a": np.array(TEXTS), "text_b": np.array(TEXTS)}),
        ("squad_text", "serving_default", {"question": np.array(["Who?"]), "context": np.array(["Nobody."])}),
    ):
        definition = tf.saved_model.load(paths[name]).signatures[signature]
        spec = definition.structured_input_signature[1]
        request = predict_pb2.PredictRequest()
        request.model_spec.name, request.model_spec.signature_name = name, signature
        for key, value in inputs.items():
            if value.dtype.kind in "iu":
                value = value.astype("int32")  # numpy's default int64 is rejected by an int32 signature
            request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
        assert set(request.inputs) == set(spec)
        for key, tensor in request.inputs.items():
            assert tf.dtypes.as_dtype(tensor.dtype) == spec[key].dtype
            shape = [d.size for d in tensor.tensor_shape.dim]
            assert tf.TensorShape(shape).is_compatible_with(spec[key].shape)
        assert tf.dtypes.as_dtype(tf.make_tensor_proto(id_inputs()["token_ids"].astype("int64")).dtype) != tf.int32


def test_over_long_requests(exported, tmp_path):
    base, models, paths = exported
    loaded = tf.saved_model.load(paths["encoder"])
    long = {k: tf.constant(np.pad(v, ((0, 0), (0, 8)))) for k, v in id_inputs().items()}
    # Python's binding rejects the shape, then calls the graph as a server would (no shape check
    # on feeds): the graph's own check stops the request with a message naming the limit.
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"longer than the exported sequence_length {SEQ}"):
        loaded.signatures["serving_default"](**long)
    text = tf.saved_model.load(paths["encoder_text"])
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"more tokens than the exported sequence_length {SEQ}"):
        text.signatures["serving_default"](text=tf.constant(["word " * 40]))
    truncating = export_for_serving(
        models["encoder"],
        "truncating",
        base_dir=str(tmp_path),
        vocabulary=bert_uncased_vocabulary(),
        sequence_length=SEQ,
        truncate=True,
    )
    cut = tf.saved_model.load(truncating["truncating"]).signatures["serving_default"](**long)
    plain = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in id_inputs().items()})
    np.testing.assert_allclose(cut["pooled_output"], plain["pooled_output"], atol=1e-5)
    assert tf.saved_model.load(truncating["truncating_text"]).signatures["serving_default"](
        text=tf.constant(["word " * 40])
    )["pooled_output"].shape == (1, 32)


def test_layout_size_versions_and_a_kill_mid_export(exported, tmp_path):
    base, models, paths = exported
    config = open(base / "models.config").read()
    local = open(base / "models.local.config").read()
    for name in ("encoder", "encoder_text", "classifier", "squad_text", "tagger"):
        assert f'name: "{name}"\n    base_path: "/models/{name}"\n    model_platform: "tensorflow"' in config
        assert f'name: "{name}"\n    base_path: "{base / name}"\n    model_platform: "tensorflow"' in local
    # Weights stored once: the variables take the weights' bytes (within 10%), not twice that.
    # (The graphs add a fixed ~0.5 MB; for MiniLM the whole folder is 1.013x its weights.)
    weights = sum(np.asarray(v).nbytes for v in models["encoder"].weights)
    folder = os.path.join(paths["encoder"], "variables")
    on_disk = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    assert weights <= on_disk <= 1.1 * weights, (on_disk, weights)

    target = tmp_path / "models"
    models["encoder"].save(str(tmp_path / "encoder.keras"))
    # The export is SIGKILLed after the SavedModel is written but before it is renamed into place.
    script = f"""
import os, signal, tensorflow as tf, keras
from bertlayers.export import export_for_serving
real_save = tf.saved_model.save
def save_then_die(*args, **kwargs):
    real_save(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
tf.saved_model.save = save_then_die
export_for_serving(keras.saving.load_model({str(tmp_path / "encoder.keras")!r}), "enc", base_dir={str(target)!r}, sequence_length={SEQ}, text=False)
"""
    run(python(script), expect=-signal.SIGKILL, timeout=180)
    assert not [n for n in os.listdir(target / "enc") if n.isdigit()]
    first = export_for_serving(models["encoder"], "enc", base_dir=str(target), sequence_length=SEQ, text=False)
    second = export_for_serving(models["encoder"], "enc", base_dir=str(target), sequence_length=SEQ, text=False)
    assert first["enc"].endswith("/enc/1") and second["enc"].endswith("/enc/2")
    assert sorted(os.listdir(target / "enc")) == ["1", "2"]  # the killed export's leftovers are gone


# Malformed requests, as a server would feed them (it checks no shape against the signature):
# (model, signature, inputs, what the error must say). Each must fail with InvalidArgumentError
# naming the input, in a process that stays alive and keeps answering good requests.
def bad_requests():
    ids = id_inputs()
    text = lambda value: np.array(value, dtype=object)  # noqa: E731
    with_ids = lambda **changes: {**ids, **changes}  # noqa: E731
    return [
        (
            "classifier_text",
            "serving_default",
            {"text": text("one scalar string")},
            r"text must be a batch of strings \[batch\] \(rank 1\)",
        ),
        ("classifier_text", "serving_default", {"text": text([["a", "b"]])}, r"text must be a batch of strings"),
        (
            "classifier_text",
            "text_pair",
            {"text_a": text(["a", "b"]), "text_b": text(["c"])},
            "text_b and text_a must have the same shape",
        ),
        (
            "squad_text",
            "serving_default",
            {"question": text("Who?"), "context": text(["Nobody."])},
            "question must be a batch of strings",
        ),
        ("tagger_text", "serving_default", {"text": text("x")}, "text must be a batch of strings"),
        (
            "encoder",
            "serving_default",
            with_ids(token_ids=ids["token_ids"][0]),
            r"token_ids must be \[batch, sequence_length\] \(rank 2\)",
        ),
        (
            "encoder",
            "serving_default",
            with_ids(segment_ids=ids["segment_ids"][:, :8]),
            "segment_ids and token_ids must have the same shape",
        ),
        (
            "encoder",
            "serving_default",
            with_ids(padding_mask=ids["padding_mask"][:1]),
            "padding_mask and token_ids must have the same shape",
        ),
        (
            "classifier",
            "serving_default",
            with_ids(token_ids=ids["token_ids"] * 0 - 1),
            r"token_ids must hold values in \[0, 30522\)",
        ),
        (
            "classifier",
            "serving_default",
            with_ids(token_ids=ids["token_ids"] + 30522),
            r"token_ids must hold values in \[0, 30522\)",
        ),
        (
            "squad",
            "serving_default",
            with_ids(segment_ids=ids["segment_ids"] + 2),
            r"segment_ids must hold values in \[0, 2\) \(type_vocab_size\)",
        ),
        (
            "tagger",
            "serving_default",
            with_ids(padding_mask=ids["padding_mask"] * 3),
            r"padding_mask must hold values in \[0, 2\)",
        ),
        (
            "classifier",
            "token_ids_only",
            {"token_ids": np.array(5, "int32")},
            r"token_ids must be \[batch, sequence_length\]",
        ),
        (
            "encoder",
            "serving_default",
            {k: np.pad(v, ((0, 0), (0, 100))) for k, v in ids.items()},
            f"longer than the exported sequence_length {SEQ}",
        ),
        (
            "encoder",
            "serving_default",
            with_ids(padding_mask=ids["padding_mask"] * np.array([[1], [0]], "int32")),
            "every sequence needs at least one real token",
        ),
        (
            "classifier",
            "serving_default",
            {k: v[:, :0] for k, v in ids.items()},
            "every sequence needs at least one real token",
        ),
        (
            "tagger",
            "token_ids_only",
            {"token_ids": np.zeros((1, 4), "int32")},
            "every sequence needs at least one real token",
        ),
        (
            "classifier",
            "serving_default",
            with_ids(padding_mask=ids["padding_mask"] * (np.arange(SEQ) > 0)),
            "starts with padding",
        ),
    ]


def test_malformed_requests_are_refused_by_name_and_the_process_keeps_serving(exported, tmp_path):
    _, _, paths = exported
    cases = bad_requests()
    good = [
        ("classifier_text", "serving_default", {"text": np.array(TEXTS, dtype=object)}),
        ("classifier_text", "serving_default", {"text": np.array([], dtype=object)}),  # an empty batch is no error
        ("classifier_text", "serving_default", {"text": np.array([b"\xff\xfe not UTF-8", b""], dtype=object)}),
        ("encoder", "serving_default", id_inputs()),
        # Texts are padded to their longest (12 pieces); ids run at their own length.
        ("tagger_text", "serving_default", {"text": np.array(TEXTS, dtype=object)}),
        ("tagger_text", "serving_default", {"text": np.array([" ".join(["word"] * 27)], dtype=object)}),
        ("encoder", "serving_default", id_inputs(length=24)),
    ]
    np.savez(
        tmp_path / "cases.npz",
        **{f"{i}_{k}": v for i, (_, _, inputs, *_) in enumerate(cases + good) for k, v in inputs.items()},
    )
    plan = [(paths[m], s, sorted(inputs)) for m, s, inputs, *_ in cases + good]
    script = f"""
import glob, importlib.util, json, numpy as np, tensorflow as tf
folder = importlib.util.find_spec('tensorflow_text').submodule_search_locations[0]
for library in sorted(glob.glob(folder + '/python/ops/*.so')):
    tf.load_op_library(library)
data, results, loaded = np.load({str(tmp_path / "cases.npz")!r}, allow_pickle=True), [], {{}}
for i, (path, signature, keys) in enumerate({plan!r}):
    model = loaded.setdefault(path, tf.saved_model.load(path))
    inputs = {{k: tf.constant(data[f'{{i}}_{{k}}'].tolist() if data[f'{{i}}_{{k}}'].dtype == object else data[f'{{i}}_{{k}}'],
                             dtype=tf.string if data[f'{{i}}_{{k}}'].dtype == object else None) for k in keys}}
    try:
        outputs = model.signatures[signature](**inputs)
        results.append(['ok', {{k: list(v.shape) for k, v in outputs.items()}}])
    except tf.errors.InvalidArgumentError as error:
        results.append(['InvalidArgumentError', error.message])
print(json.dumps(results))
"""
    result = run(python(script))  # alive: a scalar string once killed it (exit 139)
    results = json.loads(result.stdout.strip().splitlines()[-1])
    for (model, signature, _, expected), (kind, message) in zip(cases, results):
        assert kind == "InvalidArgumentError", (model, signature, expected, message)
        assert re.search(expected, message), (model, signature, expected, message)
    outcomes = results[len(cases) :]
    assert [kind for kind, _ in outcomes] == ["ok"] * len(good)
    assert (
        outcomes[0][1]["logits"] == [2, 3] and outcomes[1][1]["logits"] == [0, 3] and outcomes[2][1]["logits"] == [2, 3]
    )
    assert outcomes[4][1]["token_ids"] == [2, 12] and outcomes[4][1]["tags"] == [2, 12]
    assert outcomes[5][1]["token_ids"] == [1, 29]  # 27 words and [CLS], [SEP]
    assert outcomes[6][1]["sequence_output"] == [2, 24, TINY["hidden_size"]]


def test_export_refuses_path_tricks_and_foreign_vocabularies(exported, tmp_path):
    _, models, _ = exported
    for name in ("..", "../outside", "a/b", ".hidden", "", "a..b"):
        with pytest.raises(ValueError, match="must start with a letter or digit"):
            export_for_serving(
                models["encoder"], name, base_dir=str(tmp_path / "base"), sequence_length=SEQ, text=False
            )
    assert not (tmp_path / "outside").exists()
    small = tmp_path / "vocab.txt"
    small.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]) + "\n")
    with pytest.raises(ValueError, match="has 7 tokens, but the model's token embedding has 30522 rows"):
        export_for_serving(
            models["encoder"], "enc", base_dir=str(tmp_path / "base"), vocabulary=str(small), sequence_length=SEQ
        )
    assert not (tmp_path / "base" / "enc").exists()


def test_an_export_name_keeps_its_kind_of_model(exported, tmp_path):
    """TF Serving serves a name's newest version: an ids model written under a text model's name (or
    a tagger under a classifier's) would switch that endpoint's inputs or outputs under its clients."""
    _, models, _ = exported
    base = str(tmp_path / "base")
    export_for_serving(
        models["classifier"], "keep", base_dir=base, vocabulary=bert_uncased_vocabulary(), sequence_length=SEQ
    )
    config = open(os.path.join(base, "models.config")).read()
    with pytest.raises(
        ValueError,
        match=r"keep_text serves another kind of model: its newest version \(.*keep_text/1\) has "
        r"signature 'serving_default' with inputs \{'text': 'string \[-1\]'\}",
    ):
        export_for_serving(models["classifier"], "keep_text", base_dir=base, sequence_length=SEQ, text=False)
    with pytest.raises(ValueError, match="keep serves another kind of model"):
        export_for_serving(models["tagger"], "keep", base_dir=base, sequence_length=SEQ, text=False)
    assert sorted(os.listdir(os.path.join(base, "keep_text"))) == ["1"] and sorted(
        os.listdir(os.path.join(base, "keep"))
    ) == ["1"]
    assert open(os.path.join(base, "models.config")).read() == config
    again = export_for_serving(
        models["classifier"], "keep", base_dir=base, vocabulary=bert_uncased_vocabulary(), sequence_length=SEQ
    )
    assert again["keep"].endswith("keep/2") and again["keep_text"].endswith("keep_text/2")


def test_a_kill_between_the_pair_renames_is_completed_by_the_next_export(exported, tmp_path):
    _, models, _ = exported
    target = tmp_path / "models"
    models["encoder"].save(str(tmp_path / "encoder.keras"))
    script = f"""
import os, signal, keras
from bertlayers.export import export_for_serving
real_rename, count = os.rename, []
def rename_then_die(a, b):
    real_rename(a, b)
    count.append(1)
    if len(count) == 1:  # the ids model is in place, the text model not yet
        os.kill(os.getpid(), signal.SIGKILL)
os.rename = rename_then_die
export_for_serving(keras.saving.load_model({str(tmp_path / "encoder.keras")!r}), "enc", base_dir={str(target)!r},
                   vocabulary={bert_uncased_vocabulary()!r}, sequence_length={SEQ})
"""
    run(python(script), expect=-signal.SIGKILL)
    assert os.listdir(target / "enc") == ["1"] and not [n for n in os.listdir(target / "enc_text") if n.isdigit()]
    written = export_for_serving(
        models["encoder"], "enc", base_dir=str(target), vocabulary=bert_uncased_vocabulary(), sequence_length=SEQ
    )
    assert sorted(os.listdir(target / "enc")) == ["1", "2"] and sorted(os.listdir(target / "enc_text")) == ["1", "2"]
    assert written["enc_text"].endswith("enc_text/2")
    text = tf.saved_model.load(str(target / "enc_text" / "1")).signatures["serving_default"](text=tf.constant(TEXTS))
    assert text["pooled_output"].shape == (2, 32)
    assert not [n for n in os.listdir(target) if n.startswith(".export-journal")]


def test_the_demo_client_answers_as_the_python_model(exported, tmp_path):
    """`make demo`'s last step: examples/serving_requests.py, in a process where Keras and
    bertlayers cannot be imported, prints a REST response equal to the Keras model's output."""
    base, models, paths = exported
    texts = [argument for text in TEXTS for argument in ("--text", text)]
    command = script(
        "serving_requests.py",
        "--base_dir",
        base,
        "--name",
        "classifier",
        "--text_only",
        "--signature",
        "serving_default",
        "--version",  # the demo serves the version it exported, not whichever is newest
        os.path.basename(paths["classifier_text"]),
        *texts,
    )
    result = run(command, env=environment(PYTHONPATH=poisoned_path()))
    lines = result.stdout.splitlines()
    curl = next(i for i, line in enumerate(lines) if line.startswith("curl "))
    request = json.loads(lines[curl].split(" -d '", 1)[1].rstrip("'"))
    assert request == {"signature_name": "serving_default", "instances": [{"text": t} for t in TEXTS]}
    end = next(i for i, line in enumerate(lines) if line.startswith("(answered by TensorFlow"))
    response = json.loads("\n".join(lines[curl + 1 : end]))
    expected = keras_outputs(models["classifier"], keras_hub_packer(bert_uncased_vocabulary(), SEQ)(TEXTS))["logits"]
    served = np.array([p["logits"] for p in response["predictions"]])
    np.testing.assert_allclose(served, expected, atol=1e-4)  # the response rounds to 4 decimals
    assert [p["label"] for p in response["predictions"]] == expected.argmax(-1).tolist()


@pytest.mark.parametrize("name", ["encoder", "classifier"])
def test_bfloat16_export_computes_in_bfloat16_and_answers_in_float32(exported, tmp_path, name):
    _, models, _ = exported
    model = models[name]
    paths = export_for_serving(
        model, f"{name}_bf16", base_dir=str(tmp_path), sequence_length=SEQ, precision="bfloat16", text=False
    )
    loaded = tf.saved_model.load(paths[f"{name}_bf16"])
    assert {v.dtype for v in loaded.model_variables if v.dtype.is_floating} == {tf.bfloat16}, (
        "weights stored in bfloat16"
    )
    inputs = id_inputs()
    got = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in inputs.items()})
    want = keras_outputs(model, inputs)
    key = "pooled_output" if name == "encoder" else "logits"
    assert got[key].dtype == tf.float32
    # bfloat16 keeps 8 bits of mantissa: near the float32 model, not equal to it.
    scale = np.abs(want[key]).max()
    difference = np.abs(got[key].numpy() - want[key]).max()
    assert 0 < difference < 0.05 * scale + 1e-3, (difference, scale)
    with pytest.raises(ValueError, match="precision must be one of float32, bfloat16, int8, got .float16."):
        export_for_serving(
            model, f"{name}_half", base_dir=str(tmp_path), sequence_length=SEQ, precision="float16", text=False
        )


def test_an_int8_export_holds_int8_weights_in_tf_serving_ops_and_answers_near_float(exported, tmp_path, caplog):
    """`precision="int8"`: Keras's quantization of a copy (the model exported is left as it was);
    the dense, einsum and embedding weights stored in int8 with their scales, the other layers
    float and named in the log, only core TensorFlow ops, and answers near the float model's."""
    from test_subword_checkpoints import SERVING_TF_TEXT_OPS

    _, models, _ = exported
    model = models["classifier"]
    with caplog.at_level("INFO", logger="bertlayers.export.precision"):
        paths = export_for_serving(
            model,
            "int8",
            base_dir=str(tmp_path),
            vocabulary=bert_uncased_vocabulary(),
            sequence_length=SEQ,
            precision="int8",
        )
    assert "int8 weights in 16 layers; kept in float: LayerNormalization x5, PositionEmbedding x1" in caplog.text
    loaded = tf.saved_model.load(paths["int8"])
    int8 = [v.name for v in loaded.model_variables if v.dtype == tf.int8]
    assert len(int8) == 16 and all(re.search(r"/(kernel|embeddings):0$", name) for name in int8), int8
    assert not any(layer.quantization_mode for layer in backend.flatten_layers(model))
    for path in paths.values():
        assert graph_ops(path) <= set(dir(tf.raw_ops)) | SERVING_TF_TEXT_OPS, sorted(
            graph_ops(path) - set(dir(tf.raw_ops))
        )
    inputs = id_inputs()
    got = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in inputs.items()})
    want = keras_outputs(model, inputs)["logits"]
    difference = np.abs(got["logits"].numpy() - want).max()
    assert 0 < difference < 0.05 * np.abs(want).max() + 1e-3, difference


def test_tf_serving_batches_the_text_models_and_runs_ids_requests_alone(exported):
    """TF Serving pads a shorter request's tensors with their first element when it batches
    (`batching_util.h`): for an ids request, [CLS] ids with mask 1 read as real tokens. So only
    the text models (a string a row, concatenated unpadded) carry the `batching_params.pbtxt` that
    `--enable_per_model_batching_parameters` batches by; the ids models are run request by request."""
    base, models, paths = exported
    for name, path in paths.items():
        params = os.path.join(path, "batching_params.pbtxt")
        assert os.path.isfile(params) == name.endswith("_text"), name
        if name.endswith("_text"):
            text = open(params).read()
            assert "max_batch_size { value: 32 }" in text and "pad_variable_length_inputs: false" in text
    # Why: a request of 12 tokens batched with one of 21, padded as TF Serving pads, answers otherwise.
    alone = id_inputs(batch=1)
    short = {k: v[:, :12].copy() for k, v in alone.items()}
    short["token_ids"][:, 11], short["padding_mask"][:, 11] = 102, 1
    padded = {k: np.pad(v, ((0, 0), (0, SEQ - 12)), constant_values=v.flat[0]) for k, v in short.items()}
    states = [keras_outputs(models["encoder"], x)["sequence_output"][:, :12] for x in (padded, short)]
    assert np.abs(states[0] - states[1]).max() > 1e-3  # far past float32 round-off (1e-6): another answer


def test_models_config_lists_loadable_models_only_and_best_span_follows_its_definition(tmp_path):
    """Without any export: what `models.config` names, and the span decoder on a hand-computed case."""
    from bertlayers.export.serving_folder import write_models_config
    from bertlayers.export.task_decoders import best_span

    for folder in ("good/3", "empty", "stale.partial/1", ".hidden/1"):
        (tmp_path / folder).mkdir(parents=True)
    for folder in ("good/3", "stale.partial/1", ".hidden/1"):
        (tmp_path / folder / "saved_model.pb").write_bytes(b"")
    (tmp_path / "stale.partial" / "1" / "saved_model.pb").unlink()
    config = open(write_models_config(str(tmp_path), "/srv/models")).read()
    assert config.count("config {") == 1 and 'name: "good"\n    base_path: "/srv/models/good"' in config
    local = (tmp_path / "models.local.config").read_text()
    assert f'name: "good"\n    base_path: "{tmp_path / "good"}"' in local and local.count("config {") == 1
    compose = (tmp_path / "docker-compose.yml").read_text()
    assert "- ./:/srv/models:ro" in compose and "--model_config_file=/srv/models/models.config" in compose
    assert "--batching_parameters_file=/srv/models/batching.config" in compose
    assert "--enable_batching=true" in compose and "--enable_per_model_batching_parameters=true" in compose
    batching = (tmp_path / "batching.config").read_text()
    assert "max_batch_size { value: 32 }" in batching and "pad_variable_length_inputs: false" in batching
    (tmp_path / "batching.config").write_text("max_batch_size { value: 8 }\n")  # a user's tuning stays
    write_models_config(str(tmp_path), "/srv/models")
    assert (tmp_path / "batching.config").read_text() == "max_batch_size { value: 8 }\n"
    with pytest.raises(ValueError, match="serving_base must be an absolute path"):
        write_models_config(str(tmp_path), "models")

    start = tf.constant([[5.0, 1.0, 3.0, 0.0, 2.0]])
    end = tf.constant([[4.0, 0.0, 1.0, 3.0, 2.5]])
    allowed = tf.constant([[True, True, True, True, True]])
    # Pairs (s, e) with 1 <= s <= e < s + 2 (not [CLS]): the best is s=2, e=3 (3 + 3).
    first, last, score, null = best_span(start, end, allowed, allowed, max_answer_length=2)
    assert (int(first[0]), int(last[0]), float(score[0]), float(null[0])) == (2, 3, 6.0, 9.0)


def test_a_users_edits_to_models_config_stay_and_its_mount_is_kept(tmp_path, caplog):
    """models.config is the user's too: a version pin, an entry of their own and comments survive
    the next export, which adds only the models it wrote that the list does not name; a
    serving_base other than the folder's mount, or a file with no list to add to, is refused first."""
    from bertlayers.export import check_serving_base
    from bertlayers.export.serving_folder import write_models_config

    def model_folder(name):
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "1" / "saved_model.pb").write_bytes(b"")

    model_folder("sentiment")
    path = tmp_path / "models.config"
    written = open(write_models_config(str(tmp_path), "/srv")).read()
    assert written.startswith("# TF Serving's models") and "# serving_base: /srv" in written
    edited = written.replace(
        '    model_platform: "tensorflow"\n  }\n}\n',
        '    model_platform: "tensorflow"\n'
        '    model_version_policy { specific { versions: 1 } }  # hold { back } "v2"\n'
        '  }\n  config { name: "mine" base_path: "/elsewhere/mine" model_platform: "tensorflow" }\n}\n'
        "# served by the team's cluster\n",
    )
    path.write_text(edited)
    model_folder("stale")  # a folder the user left out of their list on purpose
    model_folder("topics")
    with caplog.at_level("INFO", logger="bertlayers.export.serving_folder"):
        write_models_config(str(tmp_path), "/srv", names=["sentiment", "topics"])
    after = path.read_text()
    assert after.startswith(edited[: edited.index('  config { name: "mine"')])  # the pinned entry as it was
    assert after.endswith('  config {\n    name: "topics"\n    base_path: "/srv/topics"\n    model_platform: '
                          '"tensorflow"\n  }\n}\n# served by the team\'s cluster\n')  # fmt: skip
    assert '"mine"' in after and '"stale"' not in after
    assert "sets the model_version_policy of sentiment" in caplog.text and "Added topics" in caplog.text
    write_models_config(str(tmp_path), "/srv", names=["sentiment", "topics"])
    assert path.read_text() == after  # nothing to add: the file is left alone

    with pytest.raises(ValueError, match=r"models.config serves this folder from /srv, and serving_base is '/models'"):
        check_serving_base(str(tmp_path), "/models")
    path.write_text(after.replace("# serving_base: /srv\n", ""))  # a list without our record: the compose file's mount
    with pytest.raises(ValueError, match=r"docker-compose.yml serves this folder from /srv"):
        write_models_config(str(tmp_path), "/models")
    path.write_text('model_config_list { config { name: "x" }\n')
    with pytest.raises(ValueError, match=r"models.config holds no `model_config_list \{ ... \}` that closes"):
        check_serving_base(str(tmp_path), "/srv")
    assert path.read_text() == 'model_config_list { config { name: "x" }\n'


@pytest.mark.slow
def test_the_serving_benchmark_runs_on_exports_and_names_an_ids_model_given_as_text(exported):
    """benchmarks/serving_text.py: a text model and an ids model timed side by side; an ids model
    passed where a text model goes is one line naming it, not a TensorFlow traceback."""

    _, _, paths = exported
    script = os.path.join(REPO, "benchmarks", "serving_text.py")
    small = ["--requests", "4", "--snippets", "40", "--rounds", "1"]
    output = run(
        [sys.executable, script, "--model", paths["classifier_text"], "--ids_model", paths["classifier"]]
        + ["--vocabulary", bert_uncased_vocabulary(), *small],
        timeout=600,
    ).stdout
    assert output.count("| ") >= 3 and "(ids, padded to a multiple of 1)" in output, output
    wrong = run([sys.executable, script, "--model", paths["classifier"], *small], expect=2)
    assert "Traceback" not in wrong.stderr, wrong.stderr[-2000:]
    assert wrong.stderr.strip().splitlines()[-1].startswith("error: ") and "not text: an ids model" in wrong.stderr


@pytest.mark.slow(reason="a prediction service child answers gRPC and REST clients")
def test_grpc_and_rest_clients_against_a_local_prediction_service(exported):
    """examples/serving_client.py over gRPC and REST (TF Serving's protos and JSON, served from the
    exported SavedModels: tests/serving_server.py) answers what the SavedModel computes; a
    malformed request is one line naming the server's answer, and the server keeps serving."""
    from serving_server import serving

    base, _, paths = exported
    served = tf.saved_model.load(paths["classifier_text"]).signatures["serving_default"](text=tf.constant(TEXTS))
    texts = [argument for text in TEXTS for argument in ("--text", text)]
    ids = ["--input", "token_ids=101,2009,102," + ",".join(["0"] * (SEQ - 3))]
    only_ids = ["--name", "classifier", "--signature", "token_ids_only"]
    pair = ["--name", "classifier_text", "--signature", "text_pair", "--input", "text_a=It rained."]
    pair += ["--input", "text_b=It stopped."]
    with serving(base) as (grpc_address, rest_url):
        for where in (["--grpc", grpc_address], ["--rest", rest_url]):

            def client(*args, expect=0, where=where):
                command = [sys.executable, os.path.join(REPO, "examples", "serving_client.py"), *where, *args]
                return run(command, expect=expect, timeout=120)

            predictions = json.loads(client("--name", "classifier_text", *texts).stdout)["predictions"]
            np.testing.assert_allclose([p["logits"] for p in predictions], served["logits"].numpy(), atol=1e-5)
            assert [p["label"] for p in predictions] == served["label"].numpy().tolist()
            assert len(json.loads(client(*pair).stdout)["predictions"]) == 1
            refused = client(*only_ids, *ids, "--input", "token_ids=1", expect=2)
            assert "different lengths" in refused.stderr.splitlines()[-1] and "Traceback" not in refused.stderr
            wrong = client(*only_ids, "--input", "token_ids=101,-5,102", expect=2)
            assert "the server refused the request" in wrong.stderr and "token_ids" in wrong.stderr, wrong.stderr
            missing = client("--name", "classifier", *ids, expect=2)
            assert "missing padding_mask, segment_ids" in missing.stderr, missing.stderr
            assert len(json.loads(client(*only_ids, *ids).stdout)["predictions"]) == 1  # still serving
    # No server there (the service has stopped): one line saying so, status 1, no traceback.
    for where in (["--grpc", grpc_address], ["--rest", rest_url]):
        command = [
            sys.executable,
            os.path.join(REPO, "examples", "serving_client.py"),
            *where,
            "--name",
            "classifier_text",
        ]
        gone = run([*command, *texts], expect=1, timeout=120)
        assert "no answer from" in gone.stderr and "is TF Serving running there?" in gone.stderr, gone.stderr
        assert "Traceback" not in gone.stderr


def test_the_ids_and_text_models_convert_to_tflite_with_the_keras_outputs(exported, tmp_path):
    """TFLite: the ids classifier in builtin ops alone, the text classifier with tensorflow-text's
    tokenizer kernels; both answer what the Keras model computes."""
    from bertlayers.export import export_tflite, tflite_interpreter
    from bertlayers.export.tflite import TEXT_OPS, custom_ops

    _, models, paths = exported
    inputs = id_inputs()
    keras_logits = np.asarray(models["classifier"](inputs)["logits"])
    ids = tflite_interpreter(export_tflite(paths["classifier"], str(tmp_path / "classifier.tflite")))
    lite = ids.get_signature_runner("serving_default")(**inputs)
    np.testing.assert_allclose(lite["logits"], keras_logits, atol=1e-5)
    with open(tmp_path / "classifier.tflite", "rb") as f:
        assert custom_ops(f.read()) == []  # the ids model: TFLite's builtin ops alone

    text = tflite_interpreter(export_tflite(paths["classifier_text"], str(tmp_path / "classifier_text.tflite")))
    with open(tmp_path / "classifier_text.tflite", "rb") as f:
        assert set(custom_ops(f.read())) == TEXT_OPS  # the tokenizer's kernels, and nothing else custom
    answer = text.get_signature_runner("serving_default")(text=np.array(TEXTS))
    packed = keras_hub_packer(bert_uncased_vocabulary(), SEQ)(TEXTS)
    np.testing.assert_allclose(answer["logits"], np.asarray(models["classifier"](packed)["logits"]), atol=1e-5)
    # TFLite's dynamic-range int8: the products' weights in int8, the answers near float's.
    quantized = tflite_interpreter(export_tflite(paths["classifier"], str(tmp_path / "int8.tflite"), int8=True))
    weights = [t for t in quantized.get_tensor_details() if t["dtype"] == np.int8]
    assert len(weights) >= 12, [t["name"] for t in quantized.get_tensor_details()]  # two layers' six projections
    lite = quantized.get_signature_runner("serving_default")(**inputs)["logits"]
    assert 0 < np.abs(lite - keras_logits).max() < 0.05 * np.abs(keras_logits).max() + 1e-3
    with pytest.raises(FileNotFoundError, match="No SavedModel at"):
        export_tflite(str(tmp_path / "nothing"), str(tmp_path / "x.tflite"))


def test_tflite_of_a_text_model_tflite_cannot_run_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    """`--tflite` on a model whose tokenizer is byte-level BPE or SentencePiece (ops TFLite has no
    kernel for) is refused before the export, not after its SavedModels and ids .tflite are written."""
    from types import SimpleNamespace

    from processes import script_result

    from bertlayers.convert.model_files import _ATTRIBUTE, save_model
    from bertlayers.tokenizers import ModelTokenizer

    encoder = BertEncoder(**TINY)
    object.__setattr__(encoder, _ATTRIBUTE, ModelTokenizer((("vocab.json", b"{}"),), "roberta", pad_id=1))
    save_model(encoder, str(tmp_path / "encoder.keras"))
    # The BPE tokenizer itself is not what is under test: its kind is.
    monkeypatch.setattr(ModelTokenizer, "in_graph", lambda self, size=None: SimpleNamespace(kind="byte_level_bpe"))
    base = tmp_path / "savedmodels"
    args = ("--model", tmp_path / "encoder.keras", "--name", "enc", "--base_dir", base, "--sequence_length", 16)
    failed = script_result("export_savedmodel.py", *args, "--tflite", expect=2)
    assert "--tflite converts a text model whose tokenizer is WordPiece" in failed.stderr
    assert "this roberta model's is byte_level_bpe: add --no_text" in failed.stderr and not base.exists()


def test_a_composed_model_that_reads_its_first_token_refuses_left_padded_requests(tmp_path):
    """A model composed from the layers (the README's: [CLS] read at position 0) is served in BERT's
    layout: a request padded on the left would be answered from a padding row, the same for every
    text; it is refused by name, and a right-padded one answered."""
    import keras

    from bertlayers.layers import BertEmbeddings, ClassificationHead, TransformerEncoderBlock

    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    padding_mask = keras.Input((None,), dtype="int32", name="padding_mask")
    x = BertEmbeddings(vocabulary_size=100, embedding_size=16, max_sequence_length=16)(token_ids)
    x = TransformerEncoderBlock(num_heads=2, intermediate_size=32)(x, padding_mask=padding_mask)
    model = keras.Model({"token_ids": token_ids, "padding_mask": padding_mask}, ClassificationHead(2)(x[:, 0]))
    paths = export_for_serving(model, "composed", base_dir=str(tmp_path), sequence_length=8, text=False)
    served = tf.saved_model.load(paths["composed"]).signatures["serving_default"]
    ids = tf.constant([[2, 7, 9, 3, 0, 0]])
    right = tf.constant([[1, 1, 1, 1, 0, 0]])
    answer = served(token_ids=ids, padding_mask=right)
    np.testing.assert_allclose(list(answer.values())[0], model({"token_ids": ids, "padding_mask": right}), atol=1e-5)
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"padding_mask row of this request starts with padding \(left padding\)"
    ):
        served(token_ids=tf.constant([[0, 0, 2, 7, 9, 3]]), padding_mask=tf.constant([[0, 0, 1, 1, 1, 1]]))

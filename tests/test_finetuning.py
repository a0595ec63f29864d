"""Fine-tuning: data handling, warm starts, layer-wise rates, the three runners, real MiniLM."""

import json
import os

import keras
import numpy as np
import pytest
from processes import (
    REPO,
    environment,
    free_ports,
    jax_processes,
    run,
    run_script,
    run_together,
    script,
    script_result,
)

from bertlayers.convert import head_pooling, load_encoder
from bertlayers.families.bert import BertEncoder
from bertlayers.models import BertPretrainer, SequenceClassifier, SpanPredictor, TokenClassifier
from bertlayers.task_data.classification import LabelMap, read_text_examples
from bertlayers.task_data.ner import decode_tags, encode_sentences, tag_vocabulary
from bertlayers.task_data.squad import SquadExample, decode_answers, make_windows, read_squad
from bertlayers.tasks import TextClassifier
from bertlayers.tokenizers import bert_uncased_vocabulary, model_tokenizer
from bertlayers.utils.assets import minilm_path

SQUAD = os.path.join(REPO, "examples", "data", "squad_mini")
TINY = dict(
    vocabulary_size=30522, num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64, max_sequence_length=128
)


@pytest.fixture(scope="module")
def tokenizer():
    return model_tokenizer(bert_uncased_vocabulary()).in_graph()


# --- SQuAD ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["train-v2.0.json", "dev-v2.0.json"])
def test_windows_and_offsets_round_trip_every_bundled_answer(tokenizer, name):
    examples = read_squad(os.path.join(SQUAD, name))
    assert any(e.is_impossible for e in examples)
    # Short windows force most contexts into several overlapping windows.
    features = make_windows(examples, tokenizer, sequence_length=48, doc_stride=12, max_query_length=16)
    assert len(features.example_index) > 2 * len(examples)
    start = np.full(features.inputs["token_ids"].shape, -1e4, "float32")
    end = start.copy()
    for window, example_index in enumerate(features.example_index):
        s, e = features.start_positions[window], features.end_positions[window]
        if s:  # the gold span, cut back out of the context by character offsets
            example = examples[example_index]
            text = example.context[features.token_spans[window][s][0] : features.token_spans[window][e][1]]
            assert text == example.answers[0][0]
            assert features.inputs["span_mask"][window, s] == 1 == features.inputs["span_mask"][window, e]
        start[window, s] = end[window, e] = 10.0
    answerable = {e.qid for e in examples if not e.is_impossible}
    targeted = {examples[i].qid for w, i in enumerate(features.example_index) if features.start_positions[w]}
    assert targeted == answerable
    predictions, _ = decode_answers(examples, features, start, end, version_2=True)
    for example in examples:
        assert predictions[example.qid] == (example.answers[0][0] if example.answers else "")


def test_answers_start_and_end_on_word_boundaries(tokenizer):
    """The best raw span starts inside a word ("##sen" of "Tarsen"): the Python decoder and the
    served graph's decoder both answer with whole words instead."""
    import tensorflow as tf

    from bertlayers.export.task_decoders import best_span
    from bertlayers.tokenizers.wordpiece import InGraphTokenizer

    context = "The Tarsen Glacier moved north."
    example = SquadExample("q", "Which glacier?", context, [], True)
    features = make_windows([example], tokenizer, sequence_length=32)
    # A layout with no special token (a decoder's tokenizer without a template) has nowhere for the
    # null answer but a context token: refused.
    import dataclasses

    bare = dataclasses.replace(tokenizer, layout=dataclasses.replace(tokenizer.layout, start=(), between=(), end=()))
    with pytest.raises(ValueError, match="no token can hold SQuAD's null answer"):
        make_windows([example], bare, sequence_length=32)
    pieces = [tokenizer.tokenizer.vocabulary[int(t)] for t in features.inputs["token_ids"][0]]
    inside, first = pieces.index("##sen"), pieces.index("##sen") - 1
    start = np.zeros((1, 32), "float32")
    end = np.zeros((1, 32), "float32")
    start[0, inside], start[0, first], end[0, inside] = 10.0, 5.0, 10.0
    predictions, nbest = decode_answers([example], features, start, end)
    assert predictions["q"] == "Tarsen"
    assert all(not c["text"].startswith("sen") for c in nbest["q"])
    # The graph: word edges from the in-graph tokenizer, placed at the same positions.
    _, _, _, starts_word, ends_word = InGraphTokenizer(bert_uncased_vocabulary()).tokenize_with_offsets(
        tf.constant([context])
    )
    offset = features.inputs["segment_ids"][0].argmax()

    def allowed(flags):
        return tf.constant(np.pad(flags.to_list()[0], (offset, 32 - offset - len(flags.to_list()[0])))[None])

    edges = [features.word_edges[0][p] for p in sorted(features.word_edges[0])]
    assert [e[0] for e in edges] == starts_word.to_list()[0] and [e[1] for e in edges] == ends_word.to_list()[0]
    s, e, _, _ = best_span(tf.constant(start), tf.constant(end), allowed(starts_word), allowed(ends_word), 30)
    assert (int(s[0]), int(e[0])) == (first, inside)
    unrestricted = tf.ones((1, 32), tf.bool)
    s, _, _, _ = best_span(tf.constant(start), tf.constant(end), unrestricted, unrestricted, 30)
    assert int(s[0]) == inside  # what the decoder answered before: "sen"


def test_squad_answer_offset_mismatch_names_the_question(tmp_path):
    data = json.load(open(os.path.join(SQUAD, "dev-v2.0.json")))
    data["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] += 3
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"question dev-00-0: answer .* is not at character"):
        read_squad(str(path))


# --- Classification and NER data ---------------------------------------------------------------


def test_classification_files_and_their_errors(tmp_path):
    good = tmp_path / "train.tsv"
    good.write_text("sentence\tother\tlabel\ngood film\tx\tpos\nbad film\ty\tneg\n")
    examples = read_text_examples(str(good), text_a="sentence", text_b="other")
    assert [(e.text_a, e.text_b, e.label) for e in examples] == [("good film", "x", "pos"), ("bad film", "y", "neg")]
    labels = LabelMap(e.label for e in examples)
    assert labels.labels == ["neg", "pos"] and labels.encode(examples).tolist() == [1, 0]
    with pytest.raises(ValueError, match=r"train.tsv:2: no column 'text'"):
        read_text_examples(str(good))
    empty = tmp_path / "empty.csv"
    empty.write_text('text,label\n"fine",a\n"  ",b\n')
    with pytest.raises(ValueError, match=r"empty.csv:3: empty text in column 'text'"):
        read_text_examples(str(empty))
    unknown = tmp_path / "test.jsonl"
    unknown.write_text('{"text": "ok", "label": "pos"}\n{"text": "hmm", "label": "meh"}\n')
    with pytest.raises(ValueError, match=r"test.jsonl:2: unknown label 'meh'; the model knows \['neg', 'pos'\]"):
        labels.encode(read_text_examples(str(unknown)))


def test_ner_labels_sit_on_the_first_wordpiece():
    tokenizer = model_tokenizer(bert_uncased_vocabulary()).in_graph()
    vocabulary = tokenizer.tokenizer.vocabulary
    sentences = [[("Unbelievably", "O"), ("Zürich", "B-geo-loc"), ("rocks", "O")]]
    tags = tag_vocabulary(sentences)
    inputs, labels, weights, starts = encode_sentences(sentences, tokenizer, 16, tags, "test")
    assert inputs["token_ids"].shape == (1, 16)
    pieces = [vocabulary[int(i)] for i in inputs["token_ids"][0] if i]
    assert pieces[:5] == ["[CLS]", "un", "##bel", "##ie", "##va"]
    first = starts[0]
    assert [pieces[i] for i in first] == ["un", "zurich", "rocks"]
    assert weights[0].sum() == 3 and labels[0, first[1]] == tags.index("B-geo-loc")
    logits = np.zeros((1, 16, len(tags)))
    logits[0, first[1], tags.index("B-geo-loc")] = 1
    assert decode_tags(logits, starts, tags) == [["O", "B-geo-loc", "O"]]
    with pytest.warns(UserWarning, match=r"1 of 1 sentences in test do not fit in sequence_length 6"):
        _, _, _, cut = encode_sentences(sentences, tokenizer, 6, tags, "test")
    assert cut[0] == [-1, -1, -1]  # the first word does not fit, so nothing after it is kept
    with pytest.raises(ValueError, match=r"word 2: unknown tag 'B-xyz'"):
        encode_sentences([[("a", "O"), ("b", "B-xyz")]], tokenizer, 16, tags, "test")


# --- Models, warm starts, layer-wise rates --------------------------------------------------------


@pytest.mark.parametrize(
    "build, extra",
    [
        (lambda e: SequenceClassifier(e, 3), {}),
        (lambda e: SequenceClassifier(e, 3, pooling="mean"), {}),
        (SpanPredictor, {"span_mask": np.ones((2, 6), "int32")}),
        (lambda e: TokenClassifier(e, 4), {}),
        (lambda e: SequenceClassifier(e, 3, feature_based=True, lstm_units=8), {}),
        (lambda e: TokenClassifier(e, 4, feature_based=True, lstm_units=8), {}),
    ],
)
def test_task_models_save_and_load(tmp_path, build, extra):
    model = build(BertEncoder(**TINY))
    x = {
        "token_ids": np.ones((2, 6), "int32"),
        "segment_ids": np.zeros((2, 6), "int32"),
        "padding_mask": np.ones((2, 6), "int32"),
        **extra,
    }
    expected = model(x)
    model.save(str(tmp_path / "m.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "m.keras"), safe_mode=True)
    for key in expected:
        np.testing.assert_allclose(loaded(x)[key], expected[key], atol=1e-6)


def test_a_mean_pooled_classifier_reads_the_real_tokens_mean_and_leaves_the_pooler_out():
    model = SequenceClassifier(BertEncoder(**TINY), 3, pooling="mean", dropout=0.0)
    x = {
        "token_ids": np.arange(1, 13, dtype="int32").reshape(2, 6),
        "segment_ids": np.zeros((2, 6), "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]], "int32"),
    }
    sequence = np.asarray(model.encoder(x)["sequence_output"])  # [2, 6, H]
    real = x["padding_mask"][:, :, None]
    mean = (sequence * real).sum(1) / real.sum(1)  # [2, H]: padding rows count for nothing
    kernel, bias = model.head.get_weights()
    np.testing.assert_allclose(model.predict_on_batch(x)["logits"], mean @ kernel + bias, atol=1e-5)
    pooler = {id(w) for w in model.encoder.pooler.weights}
    assert pooler and not pooler & {id(w) for w in model.trainable_weights}  # it gets no gradient
    for build, message in (
        (lambda e: SequenceClassifier(e, 2, pooling="avg"), "pooling must be one of pooler, mean, first, max"),
        (lambda e: SequenceClassifier(e, 2, pooling="max", feature_based=True), "feature_based"),
    ):
        with pytest.raises(ValueError, match=message):
            build(BertEncoder(**TINY))
    # Keras's functional models would drop a keyword they do not know: a tagger has no pooling.
    with pytest.raises(TypeError, match=r"TokenClassifier got pooling: not among its arguments \(encoder, num_classes"):
        TokenClassifier(BertEncoder(**TINY), 2, pooling="mean")


@pytest.mark.parametrize("model_class", [SequenceClassifier, TokenClassifier])
@pytest.mark.slow
def test_feature_based_trains_only_the_mix_the_bilstm_and_the_head(model_class, tmp_path):
    encoder = BertEncoder(**{**TINY, "num_layers": 2, "dropout": 0.5})
    model = model_class(encoder, 2, feature_based=True, lstm_units=8)
    trained = {v.path.split("/")[0] for v in model.trainable_variables}
    assert trained == {"scalar_mix", "task_network", "head"}
    x = {
        "token_ids": np.arange(1, 25, dtype="int32").reshape(4, 6),
        "segment_ids": np.zeros((4, 6), "int32"),
        "padding_mask": np.ones((4, 6), "int32"),
    }
    # The frozen encoder runs without dropout even in a training call: fixed features.
    states = model.get_layer("frozen_hidden_states")
    expected = encoder(x, training=False)
    for got, want in zip(states(x, training=True), [expected["embedding_output"], *expected["encoder_outputs"]]):
        np.testing.assert_allclose(got, want, atol=1e-6)
    encoder_before = [np.asarray(w).copy() for w in encoder.weights]
    mix_before = np.asarray(model.get_layer("scalar_mix").layer_weights).copy()
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    y = np.array([0, 1, 0, 1]) if model_class is SequenceClassifier else np.tile([0, 1, 0, 1, 0, 1], (4, 1))
    model.fit(x, {"logits": y}, epochs=2, verbose=0)
    assert all(np.array_equal(a, np.asarray(w)) for a, w in zip(encoder_before, encoder.weights))
    assert not np.allclose(mix_before, np.asarray(model.get_layer("scalar_mix").layer_weights))
    # Reloaded, the encoder is still frozen (a model's `trainable=True` would otherwise unfreeze it).
    model.save(str(tmp_path / "m.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "m.keras"))
    assert len(loaded.trainable_variables) == len(model.trainable_variables)


def test_load_encoder_from_every_source(tmp_path):
    encoder = BertEncoder(**TINY, name="enc")
    encoder.save(str(tmp_path / "encoder.keras"))
    BertPretrainer(encoder).save(str(tmp_path / "pretrainer.keras"))
    for source in (str(tmp_path / "encoder.keras"), str(tmp_path / "pretrainer.keras"), str(tmp_path)):
        loaded = load_encoder(source)
        np.testing.assert_array_equal(loaded.token_embedding.embeddings, encoder.token_embedding.embeddings)
    assert load_encoder(minilm_path()).config.hidden_size == 384
    assert (
        load_encoder(str(tmp_path / "encoder.keras"), dtype="mixed_bfloat16").layer_dtype_policy.name
        == "mixed_bfloat16"
    )
    keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]).save(str(tmp_path / "other.keras"))
    with pytest.raises(ValueError, match="holds a Sequential, which has no bertlayers encoder"):
        load_encoder(str(tmp_path / "other.keras"))
    (tmp_path / "nothing").mkdir()
    with pytest.raises(FileNotFoundError, match="holds neither a Hugging Face checkpoint"):
        load_encoder(str(tmp_path / "nothing"))


def _moved(model, x, y, epochs=2):
    """{layer name: whether any of its weights moved} after `fit` (encoder layers by their own name)."""
    owners = {layer.name: layer for layer in [*model.encoder.layers, model.head] if layer.weights}
    before = {name: [np.array(w) for w in layer.weights] for name, layer in owners.items()}
    model.fit(x, y, epochs=epochs, verbose=0)
    return {
        name: any(not np.array_equal(b, np.array(w)) for b, w in zip(before[name], layer.weights))
        for name, layer in owners.items()
    }


@pytest.mark.slow
def test_freezing_the_embeddings_and_the_lower_layers():
    encoder = BertEncoder(**{**TINY, "num_layers": 3})
    model = SequenceClassifier(encoder, 2)
    encoder.freeze_lower_layers(2)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    x = {
        "token_ids": np.arange(1, 25, dtype="int32").reshape(4, 6),
        "segment_ids": np.zeros((4, 6), "int32"),
        "padding_mask": np.ones((4, 6), "int32"),
    }
    moved = _moved(model, x, np.array([0, 1, 0, 1]))
    assert moved == {
        "embeddings": False,
        "transformer_layer_0": False,
        "transformer_layer_1": False,
        "transformer_layer_2": True,
        "pooler": True,
        "head": True,
    }, moved
    with pytest.raises(ValueError, match=r"integer in \[0, 3\].*got 4"):
        encoder.freeze_lower_layers(4)

    from bertlayers.families.albert import AlbertEncoder

    albert = AlbertEncoder(**{**TINY, "num_layers": 2, "embedding_size": 8})
    with pytest.raises(ValueError, match="their block is shared with the layers above"):
        albert.freeze_lower_layers(1)
    albert.freeze_lower_layers(2)  # every layer: the one shared block
    assert not albert.transformer_layers[0].trainable and not albert.embeddings.trainable


# --- The runners, end to end ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny")
    BertEncoder(**TINY, name="tiny").save(str(folder / "encoder.keras"))
    return str(folder / "encoder.keras")


@pytest.mark.slow
def test_run_classifier_end_to_end(tmp_path, tiny_encoder):
    data = tmp_path / "pairs.csv"
    data.write_text("a,b,label\n" + "".join(f"sentence {i},other {i},{'yes' if i % 2 else 'no'}\n" for i in range(24)))
    out = tmp_path / "out"
    run_script(
        "run_classifier.py",
        "--train_file",
        str(data),
        "--validation_split",  # no eval file: a quarter of the training rows held out (--eval_file: the other tests)
        "0.25",
        "--text_a",
        "a",
        "--text_b",
        "b",
        "--init",
        tiny_encoder,
        "--output_dir",
        str(out),
        "--epochs",
        "1",
        "--batch_size",
        "8",
        "--verbose",
        "0",
        "--pooling",
        "mean",
        "--sequence_length",
        "24",
    )
    metrics = json.load(open(out / "metrics.json"))
    assert {"accuracy", "f1", "matthews_correlation"} <= set(metrics)
    assert metrics["eval_examples"] == 6 and "held out by --validation_split" in metrics["validated_on"]
    held = [json.loads(line)["text"] for line in open(out / "predictions.jsonl")]
    assert len(held) == 6 and held == sorted(held, key=lambda text: int(text.split()[1]))  # in the file's order
    assert (out / "model.keras").exists() and os.listdir(out / "logs")
    assert keras.saving.load_model(str(out / "model.keras")).pooling == "mean"
    assert TextClassifier.load(str(out / "model.keras")).sequence_length == 24  # the run's, not the default
    assert head_pooling(str(out / "model.keras")) == "mean"  # --pooling auto from it reads what it was tuned with
    # New texts labelled with the finished run (examples/classify.py), as the run's own model labels them.
    expected = TextClassifier.load(str(out / "model.keras")).predict(["sentence 3"], ["other 3"])
    run_script(
        "classify.py",
        "--model",
        out,
        "--input_file",
        data,
        "--text_b",
        "b",
        "--text_a",
        "a",
        "--output_file",
        tmp_path / "labelled.jsonl",
    )
    labelled = [json.loads(line) for line in open(tmp_path / "labelled.jsonl")]
    assert len(labelled) == 24 and labelled[3]["text"] == "sentence 3" and labelled[3]["text_b"] == "other 3"
    assert labelled[3]["label"] == expected[0]["label"]
    np.testing.assert_allclose(
        list(labelled[3]["probabilities"].values()), list(expected[0]["probabilities"].values()), atol=1e-6
    )
    refused = script_result(
        "classify.py", "--model", out, "--input_file", data, "--output_file", tmp_path / "labelled.jsonl", expect=2
    )
    assert "labelled.jsonl exists; this script writes a new file" in refused.stderr
    done = run(
        script(
            "run_classifier.py",
            "--train_file",
            str(data),
            "--eval_file",
            str(data),
            "--text_a",
            "a",
            "--text_b",
            "b",
            "--feature_based",
            "--pooling",
            "mean",
            "--init",
            tiny_encoder,
            "--output_dir",
            str(tmp_path / "bad"),
            "--verbose",
            "0",
        ),
        expect=2,
    )
    assert "pooling='mean' pools the sequence" in done.stderr and not (tmp_path / "bad").exists()
    for given in ((), ("--eval_file", str(data), "--validation_split", "0.25")):
        refused = script_result(
            "run_classifier.py", "--train_file", data, "--output_dir", tmp_path / "x", *given, expect=2
        )
        assert "give one of --eval_file and --validation_split" in refused.stderr and not (tmp_path / "x").exists()
    refused = script_result("run_classifier.py", "--train_file", data, "--validation_split", "1", expect=2)
    assert "--validation_split: must be a float with 0 < value < 1, got '1'" in refused.stderr


def snippets(path, count, seed):
    """A CSV of `count` labelled snippets of 2 to 40 words (batches cut to several lengths)."""
    rng = np.random.default_rng(seed)
    words = "good bad fine awful great movie plot actor scene long short dull witty".split()
    rows = [" ".join(rng.choice(words, rng.integers(2, 41))) + f",{rng.choice(['pos', 'neg'])}" for _ in range(count)]
    path.write_text("text,label\n" + "\n".join(rows) + "\n")
    return path


@pytest.mark.slow(reason="two JAX runner children and a one-process run")
def test_two_jax_processes_fine_tune_and_predict_as_one_process(tmp_path, tiny_encoder):
    """`run_classifier.py --strategy multi_worker` under JAX: two processes of 2 host devices each,
    each feeding its half of every batch (cut to the batch's longest) and computing its half of
    every prediction batch, train, validate and predict as one process on one device; only the
    chief writes the run's files (the other's copies go to a folder removed when it ends)."""
    train, evaluation = snippets(tmp_path / "train.csv", 48, 0), snippets(tmp_path / "eval.csv", 20, 1)
    args = ["--train_file", train, "--eval_file", evaluation, "--init", tiny_encoder, "--epochs", "2"]
    args += ["--batch_size", "8", "--pooling", "mean", "--verbose", "0"]
    two = tmp_path / "two"
    outputs = run_together(
        script("run_classifier.py", *args, "--output_dir", two, "--strategy", "multi_worker", "--num_cpu_devices", 2),
        jax_processes(2, free_ports(1)[0]),
    )
    assert "data parallel over 4 JAX devices in 2 processes (this is process 0)" in outputs[0]
    assert "Worker 1 done; the chief (worker 0) writes the run's files." in outputs[1]
    copies = outputs[1].split("this worker's copies go to ")[1].split()[0]
    assert not os.path.exists(copies)
    assert sorted(n for n in os.listdir(two) if n[0] != ".") == [
        "history.json",
        "history.png",
        "logs",
        "metrics.json",
        "model.keras",
        "predictions.jsonl",
    ]
    one = tmp_path / "one"
    run(script("run_classifier.py", *args, "--output_dir", one), env=environment(KERAS_BACKEND="jax"))
    alone, together = json.loads((one / "history.json").read_text()), json.loads((two / "history.json").read_text())
    assert len(alone) == len(together) == 2 and alone[1]["loss"] != alone[0]["loss"]
    for a, b in zip(alone, together):
        for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
            assert abs(a[key] - b[key]) <= 1e-5, (key, a[key], b[key])
    predictions = [[json.loads(line) for line in open(folder / "predictions.jsonl")] for folder in (one, two)]
    assert len(predictions[0]) == len(predictions[1]) == 20
    for a, b in zip(*predictions):
        assert a["label"] == b["label"]
        for label, p in a["probabilities"].items():
            assert abs(p - b["probabilities"][label]) <= 1e-5
    assert json.loads((one / "metrics.json").read_text()) == json.loads((two / "metrics.json").read_text())


@pytest.mark.slow(reason="two TensorFlow worker children run the runner together")
def test_two_tensorflow_workers_fine_tune_and_predict_once_each(tmp_path, tiny_encoder):
    """`run_classifier.py --strategy multi_worker` under TensorFlow: each worker predicts every
    evaluation row once (`predict_on_batch` there returns the batch once per worker), both score
    the same, and only the chief writes the run's files."""
    train, evaluation = snippets(tmp_path / "train.csv", 24, 0), snippets(tmp_path / "eval.csv", 10, 1)
    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    outputs = run_together(
        script(
            "run_classifier.py",
            *("--train_file", train, "--eval_file", evaluation, "--init", tiny_encoder, "--epochs", 1),
            *("--batch_size", 8, "--pooling", "mean", "--verbose", 0, "--ensemble", 2),
            *("--output_dir", tmp_path / "out", "--strategy", "multi_worker"),
        ),
        [
            environment(TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}))
            for i in range(2)
        ],
    )
    assert "Worker 1 done; the chief (worker 0) writes the run's files." in outputs[1]
    assert sorted(os.listdir(tmp_path)) == ["eval.csv", "out", "train.csv"]
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["eval_examples"] == 10 and len(metrics["member_accuracies"]) == 2
    scores = [line for output in outputs for line in output.splitlines() if line.startswith("{'accuracy'")]
    assert len(scores) == 2 and scores[0] == scores[1]
    assert len((tmp_path / "out" / "predictions.jsonl").read_text().splitlines()) == 10


@pytest.mark.slow
def test_run_classifier_freezes_the_layers_asked_for(tmp_path, tiny_encoder):
    data = tmp_path / "texts.csv"
    data.write_text("text,label\n" + "".join(f"sentence {i},{'yes' if i % 2 else 'no'}\n" for i in range(16)))
    out = tmp_path / "out"
    run_script(
        "run_classifier.py",
        "--train_file",
        str(data),
        "--eval_file",
        str(data),
        "--init",
        tiny_encoder,
        "--freeze_layers",
        "1",
        "--output_dir",
        str(out),
        "--epochs",
        "1",
        "--batch_size",
        "8",
        "--verbose",
        "0",
    )
    start, trained = load_encoder(tiny_encoder), keras.saving.load_model(str(out / "model.keras")).encoder
    for name, layer in (("embeddings", trained.embeddings), ("transformer_layer_0", trained.transformer_layers[0])):
        original = start.embeddings if name == "embeddings" else start.transformer_layers[0]
        assert all(np.array_equal(a, b) for a, b in zip(original.get_weights(), layer.get_weights())), name
    assert not all(np.array_equal(a, b) for a, b in zip(start.pooler.get_weights(), trained.pooler.get_weights()))
    done = run(
        script(
            "run_classifier.py",
            "--train_file",
            str(data),
            "--eval_file",
            str(data),
            "--init",
            tiny_encoder,
            "--freeze_layers",
            "2",
            "--output_dir",
            str(tmp_path / "bad"),
            "--verbose",
            "0",
        ),
        expect=2,
    )
    assert "integer in [0, 1]" in done.stderr and "got 2" in done.stderr


@pytest.mark.slow(reason="the runner trains two restarts")
def test_restarts_keep_the_model_best_on_the_dev_file(tmp_path, tiny_encoder):
    data, dev = tmp_path / "texts.csv", tmp_path / "dev.csv"
    data.write_text("text,label\n" + "".join(f"sentence {i},{'yes' if i % 2 else 'no'}\n" for i in range(16)))
    dev.write_text("text,label\n" + "".join(f"line {i},{'yes' if i % 3 else 'no'}\n" for i in range(12)))
    out = tmp_path / "out"
    run_script(
        "run_classifier.py",
        "--train_file",
        str(data),
        "--eval_file",
        str(data),
        "--dev_file",
        str(dev),
        "--restarts",
        "2",
        "--seed",
        "5",
        "--init",
        tiny_encoder,
        "--output_dir",
        str(out),
        "--epochs",
        "1",
        "--batch_size",
        "8",
        "--verbose",
        "0",
    )
    metrics = json.load(open(out / "metrics.json"))
    scores = metrics["dev_scores"]
    assert (
        len(scores) == 2
        and metrics["best_restart"] == int(np.argmax(scores))
        and metrics["best_seed"] == 5 + metrics["best_restart"]
    )
    # Each restart's own model, and the best one kept as the run's model: its dev accuracy is the best score.
    best = keras.saving.load_model(str(out / "model.keras"))
    chosen = keras.saving.load_model(str(out / f"restart_{metrics['best_restart']}" / "model.keras"))
    assert all(np.array_equal(a, b) for a, b in zip(best.get_weights(), chosen.get_weights()))
    other = keras.saving.load_model(str(out / f"restart_{1 - metrics['best_restart']}" / "model.keras"))
    assert not all(np.array_equal(a, b) for a, b in zip(best.get_weights(), other.get_weights()))  # seeds differ
    for arguments, message in (
        (["--restarts", "2"], "give --dev_file"),
        (["--restarts", "2", "--dev_file", str(data)], "--dev_file is --eval_file"),
    ):
        done = run(
            script(
                "run_classifier.py",
                "--train_file",
                str(data),
                "--eval_file",
                str(data),
                *arguments,
                "--output_dir",
                str(tmp_path / "bad"),
                "--verbose",
                "0",
            ),
            expect=2,
        )
        assert message in done.stderr and not (tmp_path / "bad").exists()


@pytest.mark.slow
def test_run_classifier_regression(tmp_path, tiny_encoder):
    data = tmp_path / "scores.jsonl"
    data.write_text("".join(json.dumps({"text": f"item {i}", "label": i / 10}) + "\n" for i in range(16)))
    out = tmp_path / "out"
    run_script(
        "run_classifier.py",
        "--train_file",
        str(data),
        "--eval_file",
        str(data),
        "--regression",
        "--init",
        tiny_encoder,
        "--output_dir",
        str(out),
        "--epochs",
        "1",
        "--batch_size",
        "8",
        "--verbose",
        "0",
    )
    assert {"pearson", "spearman"} <= set(json.load(open(out / "metrics.json")))

    # Targets of 1e30 overflow the squared error: the run stops there, by name, and leaves no model
    # whose weights are not numbers and no predictions file with NaN in it.
    data.write_text("".join(json.dumps({"text": f"item {i}", "label": 1e30 * (i % 2)}) + "\n" for i in range(16)))
    out = tmp_path / "diverged"
    args = ["--train_file", data, "--eval_file", data, "--regression", "--init", tiny_encoder, "--output_dir", out]
    failed = script_result("run_classifier.py", *args, "--epochs", "1", "--batch_size", "8", "--verbose", "0", expect=2)
    assert "training diverged: after epoch 1, loss is" in failed.stderr and "Lower the learning rate" in failed.stderr
    assert not (out / "model.keras").exists() and not (out / "predictions.jsonl").exists()


@pytest.mark.parametrize(
    "flags",
    [[], ["--group_by_length"], ["--pad_to_sequence_length"], ["--feature_based", "--lstm_units", "8"], ["--crf"]],
)
@pytest.mark.slow
def test_run_ner_end_to_end(tmp_path, tiny_encoder, flags):
    data = tmp_path / "tiny.conll"
    data.write_text("Anna\tB-person\nlives\tO\nin\tO\nOslo\tB-geo-loc\n\nBob\tB-person\nleft\tO\n\n" * 4)
    out = tmp_path / "out"
    run_script(
        "run_ner.py",
        "--train_file",
        str(data),
        "--eval_file",
        str(data),
        "--init",
        tiny_encoder,
        "--output_dir",
        str(out),
        "--epochs",
        "1",
        "--batch_size",
        "4",
        "--verbose",
        "0",
        *flags,
    )
    assert {"precision", "recall", "f1", "per_type"} <= set(json.load(open(out / "metrics.json")))
    assert (out / "predictions.conll").read_text().count("\n\n") == 8
    if "--crf" in flags:
        assert json.load(open(out / "metrics.json"))["decoder"] == "crf"
        assert keras.saving.load_model(str(out / "model.keras")).crf is not None


def test_crf_labels_continue_a_words_entity_and_need_an_o_tag():
    tokenizer = model_tokenizer(bert_uncased_vocabulary()).in_graph()
    sentence = [("Anna", "B-person"), ("Zwolinski", "I-person"), ("visits", "O"), ("Oslo", "B-geo-loc")]
    tags = ["O", "B-geo-loc", "B-person", "I-person"]
    x, labels, weights, starts = encode_sentences([sentence], tokenizer, 16, tags, "test", every_piece=True)
    pieces = x["padding_mask"][0].sum()
    named = [tags[i] for i in labels[0, :pieces]]
    # [CLS] anna z ##wo ##lin ##ski visits oslo [SEP]: a word's later pieces continue its tag ("B-" -> "I-").
    assert named[0] == named[-1] == "O" and named[starts[0][0]] == "B-person"
    assert set(named[starts[0][1] : starts[0][2]]) == {"I-person"} and starts[0][2] - starts[0][1] > 1
    assert weights[0].sum() == 4 and named[starts[0][3]] == "B-geo-loc"
    with pytest.raises(ValueError, match="every_piece labels the special tokens 'O'"):
        encode_sentences([[("Anna", "B-person")]], tokenizer, 16, ["B-person"], "test", every_piece=True)


@pytest.mark.slow
def test_run_squad_end_to_end(tmp_path, tiny_encoder):
    out = tmp_path / "out"
    output = run_script(
        "run_squad.py",
        "--init",
        tiny_encoder,
        "--output_dir",
        str(out),
        "--epochs",
        "1",
        "--batch_size",
        "8",
        "--sequence_length",
        "96",
        "--verbose",
        "0",
        "--version_2_with_negative",
        "--group_by_length",
        "--ensemble",
        "2",
    )  # answer positions stay whole while the windows are cut
    metrics = json.load(open(out / "metrics.json"))
    assert metrics["total"] == 12 and "no_answer_exact_match" in metrics
    # An ensemble of two span predictors (seeds 0 and 1), each member also scored alone.
    assert metrics["ensemble_seeds"] == [0, 1] and len(metrics["member_f1"]) == len(metrics["member_exact_match"]) == 2
    model = keras.saving.load_model(str(out / "model.keras"))
    assert [type(member).__name__ for member in model.members] == ["SpanPredictor"] * 2
    assert len(json.load(open(out / "predictions.json"))) == 12
    assert "training questions" in output


@pytest.mark.parametrize(
    "flags, traced_length", [([], None), (["--group_by_length"], None), (["--pad_to_sequence_length"], 16)]
)
@pytest.mark.slow
def test_training_batches_are_cut_to_their_longest_unless_padding_is_asked_for(
    tmp_path, tiny_encoder, flags, traced_length
):
    import argparse

    from bertlayers.runs.finetuning import finetune
    from bertlayers.runs.finetuning_config import FinetuningConfig, add_finetuning_arguments
    from bertlayers.runs.output_folder import start

    args = add_finetuning_arguments(argparse.ArgumentParser(), sequence_length=16).parse_args(
        [
            "--init",
            tiny_encoder,
            "--output_dir",
            str(tmp_path),
            "--epochs",
            "1",
            "--batch_size",
            "4",
            "--verbose",
            "0",
            *flags,
        ]
    )
    lengths = np.random.default_rng(0).integers(3, 16, 12)  # all shorter than the arrays' 16
    mask = (np.arange(16)[None, :] < lengths[:, None]).astype("int32")
    x = {"token_ids": mask * 1000, "segment_ids": np.zeros_like(mask), "padding_mask": mask}
    traced = []

    def build(encoder):
        model = SequenceClassifier(encoder, 2)
        step = model.train_step

        def recording_step(data):  # runs while `fit` traces: the batch's sequence axis as traced
            traced.append(data[0]["token_ids"].shape[1])
            return step(data)

        model.train_step = recording_step
        return model

    config = FinetuningConfig.from_args(args)
    finetune(start(config), config, build, (x, {"logits": np.arange(12) % 2}, None))
    assert traced and set(traced) == {traced_length}


def test_training_batch_flags_exclude_each_other(capsys):
    import argparse

    from bertlayers.runs.finetuning_config import FinetuningConfig, add_finetuning_arguments

    parser = add_finetuning_arguments(argparse.ArgumentParser())
    with pytest.raises(SystemExit):
        parser.parse_args(["--output_dir", "out", "--group_by_length", "--pad_to_sequence_length"])
    assert "not allowed with argument" in capsys.readouterr().err
    with pytest.raises(ValueError, match="group_by_length and pad_to_sequence_length exclude each other"):
        FinetuningConfig("out", group_by_length=True, pad_to_sequence_length=True)


def test_the_fine_tuning_config_is_typed_and_range_checked(capsys):
    import argparse

    from bertlayers.runs.finetuning import finetune
    from bertlayers.runs.finetuning_config import (
        FinetuningConfig,
        add_feature_based_arguments,
        add_finetuning_arguments,
        finetuning_config,
    )

    parser = add_finetuning_arguments(add_feature_based_arguments(argparse.ArgumentParser()), learning_rate=2e-4)
    config = FinetuningConfig.from_args(parser.parse_args(["--output_dir", "out", "--epochs", "2"]))
    assert (config.learning_rate, config.epochs, config.output_dir) == (2e-4, 2, "out")
    for change, message in (
        ({"batch_size": 0}, "batch_size must be an int with 1 <= value, got 0"),
        ({"learning_rate": float("nan")}, "learning_rate must be a float with 0 < value, got nan"),
        ({"warmup_proportion": 1.5}, r"warmup_proportion must be a float with 0 <= value <= 1"),
        ({"layerwise_decay": 0.0}, "layerwise_decay"),
        ({"precision": "float8"}, "precision must be one of float32, mixed_bfloat16, mixed_float16"),
        ({"strategy": "gpu"}, "strategy must be one of"),
        ({"epochs": 2.5}, "epochs must be an int"),
        ({"freeze_layers": -1}, "freeze_layers must be an int with 0 <= value, got -1"),
        ({"feature_based": True, "freeze_layers": 1}, "feature_based freezes the whole encoder already"),
    ):
        with pytest.raises(ValueError, match=message):
            FinetuningConfig("out", **change)
    with pytest.raises(SystemExit):  # the scripts: one line naming the flag, status 2
        parser.parse_args(["--output_dir", "out", "--warmup_proportion", "-1"])
    assert "argument --warmup_proportion: must be a float with 0 <= value <= 1, got '-1'" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # what the flags cannot say alone, the config says
        finetuning_config(parser, parser.parse_args(["--output_dir", "out", "--feature_based", "--freeze_layers", "1"]))
    assert "feature_based freezes the whole encoder already" in capsys.readouterr().err
    with pytest.raises(TypeError, match=r"Expected a FinetuningConfig, got a Namespace"):
        finetune(None, argparse.Namespace(), None, None)


# --- Real weights ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_run_classifier_validates_every_epoch_keeps_the_best_and_says_where_its_files_are(tmp_path, tiny_encoder):
    """Validation after every epoch (history and TensorBoard), the best epoch's weights kept and
    early stopping (on a model whose validation loss rises: a learning rate that overshoots), the
    predictions with their texts and probabilities, a warning on too few steps, where the files
    went, and --pooling auto choosing mean for the sentence-transformers MiniLM."""
    from bertlayers.runs.finetuning_config import FinetuningConfig, pooling_for

    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"sentence {i},{'yes' if i % 2 else 'no'}\n" for i in range(32)))
    evaluation = tmp_path / "eval.csv"
    evaluation.write_text("text,label\n" + "".join(f"other {i},{'no' if i % 3 else 'yes'}\n" for i in range(12)))
    out = tmp_path / "out"
    common = ["--train_file", train, "--eval_file", evaluation, "--init", tiny_encoder, "--verbose", "2"]
    output = run_script(
        "run_classifier.py", *common, "--output_dir", out, "--epochs", "6", "--batch_size", "8",
        "--learning_rate", "0.05", "--early_stopping", "2",
    )  # fmt: skip
    history = json.load(open(out / "history.json"))
    val_losses = [epoch["val_loss"] for epoch in history]
    best = int(np.argmin(val_losses))
    assert len(history) == min(6, best + 3), val_losses  # stopped 2 epochs after the best
    assert f"Keeping the weights of epoch {best + 1}" in output and "Only 24 optimizer steps" in output
    assert os.listdir(out / "logs" / "validation")  # the validation curve in TensorBoard
    model = keras.saving.load_model(str(out / "model.keras"))
    metrics = json.load(open(out / "metrics.json"))
    assert metrics["validated_on"] == str(evaluation) and metrics["pooling"] == "pooler"
    predictions = [json.loads(line) for line in open(out / "predictions.jsonl")]
    assert predictions[0]["text"] == "other 0" and predictions[0]["id"].endswith("eval.csv:2")
    assert all(abs(sum(p["probabilities"].values()) - 1) < 1e-4 for p in predictions)
    assert all(p["label"] == max(p["probabilities"], key=p["probabilities"].get) for p in predictions)
    # The kept model is the best epoch's: its cross-entropy on the eval file is the best validation loss.
    truth = ["no" if i % 3 else "yes" for i in range(12)]
    loss = -np.mean([np.log(p["probabilities"][label]) for p, label in zip(predictions, truth)])
    assert abs(loss - val_losses[best]) < 1e-3, (loss, val_losses)
    assert f"Files in {out}: history.json, history.png, logs/" in output and "predictions.jsonl" in output
    # The curves beside the history: a panel a logged quantity (loss, accuracy), training and validation.
    assert (out / "history.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert model.pooling == "pooler"
    minilm = FinetuningConfig(output_dir=str(tmp_path / "m"))
    assert pooling_for(minilm, "auto") == "mean" and pooling_for(minilm, "first") == "first"
    assert pooling_for(FinetuningConfig(output_dir=str(tmp_path / "m"), random_init=True), "auto") == "pooler"


def test_the_training_curves_draw_every_logged_quantity_and_are_left_out_without_matplotlib(tmp_path, monkeypatch):
    """A run's history.png: one panel a quantity (loss, accuracy; not the learning rate), the
    training and validation curves on it; without matplotlib the run goes on without it."""
    import sys

    import matplotlib.pyplot as plt

    from bertlayers.utils.charts import training_curves

    history = [
        {"epoch": e, "loss": 1.0 / (e + 1), "accuracy": 0.5 + 0.1 * e, "learning_rate": 1e-4, "val_loss": 0.9 - 0.1 * e}
        for e in range(3)
    ]
    drawn = []
    monkeypatch.setattr(plt.Axes, "plot", lambda self, *a, **k: drawn.append((self.get_title(), a, k.get("label"))))
    assert training_curves(history, str(tmp_path / "history.png"))
    assert (tmp_path / "history.png").read_bytes()[:4] == b"\x89PNG"
    # Two panels in the history's order (loss with its validation curve, then accuracy), no learning rate.
    assert [(a[0], label) for _, a, label in drawn] == [
        ((1, 2, 3), "training"),
        ((1, 2, 3), "validation"),
        ((1, 2, 3), "training"),
    ]
    np.testing.assert_allclose(drawn[1][1][1], [0.9, 0.8, 0.7])  # the validation loss by epoch
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    assert not training_curves(history, str(tmp_path / "none.png")) and not (tmp_path / "none.png").exists()

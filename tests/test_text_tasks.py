"""`TextClassifier`: strings in, labels out, from a checkpoint's tokenizer; it fits, predicts what
its Keras model computes, saves, loads and exports a text model that answers the same."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bertlayers.convert import record_tokenizer, save_model
from bertlayers.families.bert import BertEncoder
from bertlayers.tasks import TextClassifier
from bertlayers.tokenizers import bert_uncased_vocabulary

TINY = dict(
    vocabulary_size=30522, num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32, max_sequence_length=32
)
TEXTS = ["a warm, funny film", "a dull mess", "Zürich's café—open late!", "the plot is paper-thin"]


@pytest.fixture(scope="module")
def encoder_file(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("encoder") / "encoder.keras")
    keras.utils.set_random_seed(
        0
    )  # the same weights whatever ran before in the worker (the tests' outcomes rely on them)
    save_model(record_tokenizer(BertEncoder(**TINY), bert_uncased_vocabulary()), path)
    return path


@pytest.mark.slow
def test_fit_predict_save_load_and_export(encoder_file, tmp_path):
    classifier = TextClassifier.from_checkpoint(encoder_file, labels=["no", "yes"], sequence_length=16)
    assert classifier.model.pooling == "pooler"  # no sentence-transformers pooling declared
    history = classifier.fit(TEXTS * 4, ["yes", "no", "yes", "no"] * 4, epochs=2, batch_size=4, verbose=0)
    assert len(history.history["loss"]) == 2
    predicted = classifier.predict(TEXTS)
    logits = np.asarray(classifier.model(classifier.inputs(TEXTS))["logits"])
    expected = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose([list(p["probabilities"].values()) for p in predicted], expected, atol=1e-5)
    assert [p["label"] for p in predicted] == [["no", "yes"][i] for i in expected.argmax(-1)]
    assert classifier.predict(TEXTS[:2], pairs=TEXTS[2:])[0]["label"] in ("no", "yes")

    classifier.save(str(tmp_path / "classifier.keras"))
    loaded = TextClassifier.load(str(tmp_path / "classifier.keras"))  # at the length it was saved with
    assert (
        loaded.sequence_length == 16 and TextClassifier.load(str(tmp_path / "classifier.keras"), 8).sequence_length == 8
    )
    np.testing.assert_allclose(loaded.predict_proba(TEXTS), classifier.predict_proba(TEXTS), atol=1e-6)

    paths = classifier.export(str(tmp_path / "savedmodels"), "sentiment")
    served = tf.saved_model.load(paths["sentiment_text"]).signatures["serving_default"]
    answer = served(text=tf.constant(TEXTS))
    np.testing.assert_allclose(answer["probabilities"].numpy(), expected, atol=1e-5)


@pytest.mark.slow(reason="the same classifier fine-tuned twice: by TextClassifier.fit and by a run")
def test_the_task_model_and_a_run_train_through_one_path_to_the_same_weights(encoder_file, tmp_path):
    """`TextClassifier.fit` and `runs.finetuning.finetune` (what run_classifier.py calls) with the
    same settings and seed: one optimizer, one batching, one validation and one kept epoch, so
    the same weights, the same history and the same epoch kept."""
    import keras

    from bertlayers.models import SequenceClassifier
    from bertlayers.runs.finetuning import finetune
    from bertlayers.runs.finetuning_config import FinetuningConfig
    from bertlayers.runs.output_folder import start

    texts, labels = TEXTS * 3, ["yes", "no", "yes", "no"] * 3
    held = (TEXTS, ["no", "yes", "no", "yes"])  # the training texts mislabelled: worse as it learns
    settings = dict(epochs=4, batch_size=2, learning_rate=3e-2, seed=3, verbose=0)  # it learns: 24 steps

    keras.utils.set_random_seed(3)
    classifier = TextClassifier.from_checkpoint(encoder_file, labels=["no", "yes"], sequence_length=16)
    history = classifier.fit(texts, labels, validation=held, **settings).history

    config = FinetuningConfig(output_dir=str(tmp_path / "run"), init=encoder_file, sequence_length=16, **settings)
    ids = {"no": 0, "yes": 1}
    x, held_x = classifier.inputs(texts), classifier.inputs(held[0])
    model = finetune(
        start(config),
        config,
        lambda encoder: SequenceClassifier(encoder, 2, label_names=["no", "yes"], pooling="pooler"),
        (x, {"logits": np.array([ids[label] for label in labels])}, None),
        (held_x, {"logits": np.array([ids[label] for label in held[1]])}, None),
    )
    run = json.loads((tmp_path / "run" / "history.json").read_text())
    np.testing.assert_allclose([e["val_loss"] for e in run], history["val_loss"], atol=1e-6)
    np.testing.assert_allclose([e["loss"] for e in run], history["loss"], atol=1e-6)
    for ours, theirs in zip(classifier.model.weights, model.weights):
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), atol=1e-6)
    # The epoch kept is the lowest validation loss's (not the last, where they differ).
    kept = classifier.model.evaluate(held_x, {"logits": np.array([0, 1, 0, 1])}, verbose=0, return_dict=True)
    assert np.argmin(history["val_loss"]) < 3, history["val_loss"]
    assert abs(kept["loss"] - min(history["val_loss"])) < 1e-5


def test_bad_calls_are_refused_by_name(encoder_file, tmp_path):
    BertEncoder(**TINY).save(str(tmp_path / "bare.keras"))
    with pytest.raises(ValueError, match="bare.keras has no tokenizer recorded"):
        TextClassifier.from_checkpoint(str(tmp_path / "bare.keras"), labels=["no", "yes"])
    with pytest.raises(ValueError, match="two or more distinct names"):
        TextClassifier.from_checkpoint(encoder_file, labels=["yes", "yes"])
    classifier = TextClassifier.from_checkpoint(encoder_file, labels=["no", "yes"], sequence_length=16)
    with pytest.raises(ValueError, match=r"labels \['maybe'\] are not among the classifier's \['no', 'yes'\]"):
        classifier.fit(TEXTS, ["yes", "no", "maybe", "no"], epochs=1, verbose=0)
    with pytest.raises(TypeError, match="texts must be a list of strings"):
        classifier.predict("one string")
    with pytest.raises(ValueError, match="pairs has 1 texts for 4 texts"):
        classifier.predict(TEXTS, pairs=["x"])
    # Nothing, None, a number among the texts, a length past the model's positions: by name, first.
    assert classifier.predict([]) == [] and classifier.predict_proba([]).shape == (0, 2)
    with pytest.raises(TypeError, match="texts must be a list of strings, got NoneType"):
        classifier.predict(None)
    with pytest.raises(TypeError, match=r"texts\[1\] is a int \(5\), not one of strings"):
        classifier.predict(["fine", 5])
    with pytest.raises(ValueError, match="fit needs examples: texts is empty"):
        classifier.fit([], [], epochs=1, verbose=0)
    with pytest.raises(TypeError, match="labels must be a list of label names, got NoneType"):
        classifier.fit(TEXTS, None, epochs=1, verbose=0)
    with pytest.raises(TypeError, match="fit got epoch: not a fit setting; the settings are epochs, batch_size"):
        classifier.fit(TEXTS, ["yes", "no", "yes", "no"], epoch=1)
    with pytest.raises(ValueError, match=r"sequence_length 64 exceeds the model's 32 positions"):
        TextClassifier.from_checkpoint(encoder_file, labels=["no", "yes"], sequence_length=64)
    from bertlayers.tasks import TextAnswerer, TextTagger

    tagger = TextTagger.from_checkpoint(encoder_file, ["O", "B-LOC"], sequence_length=16)
    assert tagger.predict([]) == []
    with pytest.raises(TypeError, match="texts must be a list of strings \\(or lists of words\\), got NoneType"):
        tagger.predict(None)
    with pytest.raises(ValueError, match="fit needs examples: tags is empty"):
        tagger.fit([], [], epochs=1, verbose=0)
    answerer = TextAnswerer.from_checkpoint(encoder_file, sequence_length=32, doc_stride=8, max_query_length=8)
    assert answerer.predict([], []) == []
    with pytest.raises(TypeError, match="contexts must be a list of strings, got NoneType"):
        answerer.predict(["Where?"], None)
    with pytest.raises(TypeError, match="answers must be a list of one answer a question"):
        answerer.fit(["Where?"], ["Paris."], None, epochs=1, verbose=0)
    assert len(classifier.predict(TEXTS)) == 4  # still usable


@pytest.mark.slow
@pytest.mark.parametrize("crf", [False, True])
def test_the_tagger_fits_on_words_predicts_on_strings_and_saves_its_tags(encoder_file, tmp_path, crf):
    from bertlayers.task_data.ner import decode_tags, encode_sentences, word_tags
    from bertlayers.tasks import TextTagger, words_of

    assert words_of("Flights to New York, today.") == ["Flights", "to", "New", "York", ",", "today", "."]
    tags = ["O", "B-LOC", "I-LOC"]
    tagger = TextTagger.from_checkpoint(encoder_file, tags, sequence_length=16, crf=crf)
    sentences = [["Flights", "to", "New", "York"], ["Rain", "in", "Paris"]] * 4
    labels = [["O", "O", "B-LOC", "I-LOC"], ["O", "O", "B-LOC"]] * 4
    history = tagger.fit(sentences, labels, validation=(sentences[:2], labels[:2]), epochs=2, batch_size=4, verbose=0)
    assert len(history.history["loss"]) == len(history.history["val_loss"]) == 2
    texts = ["Flights to New York, today.", "Rain in Paris"]
    predicted = tagger.predict(texts)
    assert [[word for word, _ in row] for row in predicted] == [words_of(text) for text in texts]
    # What the Keras model computes, decoded on each word's first piece.
    x, _, _, starts = encode_sentences(
        [[(word, "O") for word in words_of(text)] for text in texts], tagger.tokenizer, 16, tags, "t"
    )
    outputs = tagger.model.predict(x, verbose=0)
    expected = word_tags(outputs["tags"], starts, tags) if crf else decode_tags(outputs["logits"], starts, tags)
    assert [[tag for _, tag in row] for row in predicted] == expected

    tagger.save(str(tmp_path / "tagger.keras"))
    loaded = TextTagger.load(str(tmp_path / "tagger.keras"))
    assert loaded.sequence_length == 16 and loaded.tags == tags and loaded.predict(texts) == predicted
    with pytest.raises(ValueError, match="text 1 has 4 words but 3 tags"):
        tagger.fit([sentences[0]], [["O", "O", "B-LOC"]], epochs=1, verbose=0)


@pytest.mark.slow
def test_the_answerer_fits_and_answers_with_spans_of_the_context_as_the_served_model_does(encoder_file, tmp_path):
    from bertlayers.tasks import TextAnswerer

    answerer = TextAnswerer.from_checkpoint(encoder_file, sequence_length=32, doc_stride=8, max_query_length=8)
    contexts = ["The Scarth public library moved into the old corn exchange in 1988.", "Rain fell on Paris all day."]
    questions = ["When did the library move?", "Where did rain fall?"]
    history = answerer.fit(
        questions * 4,
        contexts * 4,
        ["1988", "Paris"] * 4,
        validation=(questions, contexts, ["1988", "Paris"]),
        epochs=2,
        batch_size=4,
        verbose=0,
    )
    assert len(history.history["loss"]) == len(history.history["val_loss"]) == 2
    answers = answerer.predict(questions, contexts)
    for answer, context in zip(answers, contexts):
        start = answer["start_char"]
        assert answer["answer"] and context[start : start + len(answer["answer"])] == answer["answer"]
    # The exported text model decodes the same span in the graph.
    paths = answerer.export(str(tmp_path / "savedmodels"), "qa")
    served = tf.saved_model.load(paths["qa_text"]).signatures["serving_default"](
        question=tf.constant(questions), context=tf.constant(contexts)
    )
    assert [a.decode("utf-8") for a in served["answer_text"].numpy()] == [a["answer"] for a in answers]

    answerer.save(str(tmp_path / "qa.keras"))
    again = TextAnswerer.load(str(tmp_path / "qa.keras"))  # its windows as saved, not the defaults
    assert again.windows == dict(sequence_length=32, doc_stride=8, max_query_length=8)
    assert again.predict(questions, contexts) == answers
    with pytest.raises(ValueError, match="example 1: the answer 'Berlin' is not in its context"):
        answerer.fit(questions, contexts, ["Berlin", "Paris"], epochs=1, verbose=0)
    with pytest.raises(ValueError, match="2 questions for 1 contexts"):
        answerer.predict(questions, contexts[:1])


@pytest.mark.slow(reason="exports a tiny classifier with int8 weights after scoring it both ways")
def test_precision_check_scores_float32_and_int8_alike_and_the_export_prints_it(encoder_file, tmp_path):
    """`precision_check`: the same labelled texts scored by the float32 model and its int8 copy
    (what `export_for_serving(precision="int8")` serves); `export_savedmodel.py --check_file`
    prints it before exporting (and with --tflite the TFLite file's score after converting), and
    refuses the flag without a lower precision."""
    import csv

    from processes import run_script, script_result

    from bertlayers.export.precision import in_precision
    from bertlayers.tasks.precision_check import precision_check

    classifier = TextClassifier.from_checkpoint(encoder_file, labels=["no", "yes"], sequence_length=16)
    labels = ["yes", "no", "yes", "no"]
    result = precision_check(classifier, TEXTS, labels, "int8")
    by_hand = [
        [row["label"] for row in TextClassifier(model, 16).predict(TEXTS)]
        for model in (classifier.model, in_precision(classifier.model, "int8"))
    ]
    scores = [100 * np.mean([a == b for a, b in zip(given, labels)]) for given in by_hand]
    assert result == {
        "examples": 4,
        "metric": "accuracy",
        "float32": scores[0],
        "int8": scores[1],
        "change": scores[1] - scores[0],
        "same_answers": np.mean([a == b for a, b in zip(*by_hand)]),
    }
    classifier.save(str(tmp_path / "model.keras"))
    with open(tmp_path / "check.csv", "w", newline="") as f:
        csv.writer(f).writerows([("text", "label"), *zip(TEXTS, labels)])
    common = ["--model", str(tmp_path / "model.keras"), "--name", "tiny", "--base_dir", str(tmp_path / "served")]
    output = run_script(
        "export_savedmodel.py",
        *common,
        "--sequence_length",
        "16",
        "--precision",
        "int8",
        "--check_file",
        tmp_path / "check.csv",
        "--tflite",  # beside the int8 SavedModel: TFLite's own dynamic-range int8, from a float32 one
        "--no_text",  # (the text model's int8 export and conversion: tests/test_export.py)
    )
    assert (
        f"int8 against float32 on 4 examples of {tmp_path / 'check.csv'}: accuracy {scores[0]:.2f} -> {scores[1]:.2f}"
        in output
    )
    from bertlayers.export import tflite_interpreter

    lite = tflite_interpreter(str(tmp_path / "served" / "tflite" / "tiny.tflite"))
    assert any(t["dtype"] == np.int8 for t in lite.get_tensor_details())
    # The TFLite file scored too: its answers by hand, a text at a time through the interpreter.
    runner, x = lite.get_signature_runner("serving_default"), classifier.inputs(TEXTS)
    lite_labels = [
        classifier.labels[int(runner(**{k: v[i : i + 1] for k, v in x.items()})["logits"][0].argmax())]
        for i in range(len(TEXTS))
    ]
    lite_score = 100 * np.mean([a == b for a, b in zip(lite_labels, labels)])
    assert (
        f"TFLite int8 against float32 on 4 examples of {tmp_path / 'check.csv'}: accuracy {scores[0]:.2f} -> "
        + (
            f"{lite_score:.2f} ({lite_score - scores[0]:+.2f} points), the same answer for "
            f"{100 * np.mean([a == b for a, b in zip(lite_labels, by_hand[0])]):.1f}%"
        )
        in output
    )
    served = {name for name in os.listdir(tmp_path / "served") if not name.startswith(".")}
    assert {"tiny", "tflite"} <= served and "tiny_text" not in served, served
    refused = script_result("export_savedmodel.py", *common, "--check_file", str(tmp_path / "check.csv"), expect=2)
    assert "--check_file compares float32 with the --precision exported" in refused.stderr

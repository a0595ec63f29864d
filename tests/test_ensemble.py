"""Ensembles of fine-tuned models (classifiers, taggers, span predictors, multiple-choice and
multi-task models): the mean of the members' probabilities (by hand), saved, served, and run by
each fine-tuning runner's `--ensemble N`."""

import os

import keras
import numpy as np
import pytest

from bertlayers.families.bert import BertEncoder
from bertlayers.layers import MeanProbabilities
from bertlayers.models import ClassifierEnsemble, SequenceClassifier, TokenClassifier
from bertlayers.testing import encoder_batch, run_layer_test

TINY = dict(vocabulary_size=100, num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32)


def _tiny_encoder_file(folder):
    """A tiny encoder over bert-base-uncased's vocabulary (what a runner falls back to), saved: the
    runners' ensembles are checked for their mechanics, not their accuracy."""
    path = str(folder / "tiny_encoder.keras")
    BertEncoder(**{**TINY, "vocabulary_size": 30522}).save(path)
    return path


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_mean_probabilities_layer():
    rng = np.random.default_rng(0)
    run_layer_test(
        MeanProbabilities,
        {},
        {"logits": [rng.normal(size=(4, 3)).astype("float32") for _ in range(3)]},
        (4, 3),
        mixed_output_dtype="float32",
        trainable=False,
    )


def test_mean_probabilities_is_the_log_of_the_mean_of_the_softmaxes():
    rng = np.random.default_rng(1)
    logits = [rng.normal(0, 5, size=(6, 4)).astype("float32") for _ in range(3)]
    out = np.asarray(MeanProbabilities()(logits))
    np.testing.assert_allclose(np.exp(out), np.mean([_softmax(x) for x in logits], axis=0), atol=1e-6)
    np.testing.assert_allclose(_softmax(out), np.exp(out), atol=1e-6)  # a softmax of it is the mean again


def _seeded(build, count=2):
    """`count` models `build(encoder)` over tiny encoders, model k built with seed k."""
    members = []
    for seed in range(count):
        keras.utils.set_random_seed(seed)
        members.append(build(BertEncoder(**TINY)))
    return members


def _members(count=3):
    return _seeded(lambda encoder: SequenceClassifier(encoder, 3, label_names=["a", "b", "c"]), count)


def test_the_ensemble_answers_the_members_mean_and_saves(tmp_path):
    members = _members()
    ensemble = ClassifierEnsemble(members)
    batch = encoder_batch(100)
    probabilities = _softmax(np.asarray(ensemble(batch)["logits"]))
    mean = np.mean([_softmax(np.asarray(m(batch)["logits"])) for m in members], axis=0)
    np.testing.assert_allclose(probabilities, mean, atol=1e-6)
    assert ensemble.label_names == ["a", "b", "c"] and not ensemble.trainable_weights
    ensemble.save(str(tmp_path / "ensemble.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "ensemble.keras"), safe_mode=True)
    np.testing.assert_allclose(np.asarray(loaded(batch)["logits"]), np.asarray(ensemble(batch)["logits"]), atol=1e-6)


def test_members_that_do_not_agree_are_refused_by_name():
    keras.utils.set_random_seed(0)
    other = SequenceClassifier(BertEncoder(**TINY), 2)
    with pytest.raises(ValueError, match="must take the same named inputs"):
        ClassifierEnsemble([_members(1)[0], other])
    with pytest.raises(ValueError, match="at least 2 members"):
        ClassifierEnsemble(_members(1))


@pytest.mark.tensorflow_only
def test_the_ensemble_serves_what_keras_computes():
    from bertlayers.testing import check_served_equals_keras

    served = check_served_equals_keras(ClassifierEnsemble(_members(2)), encoder_batch(100), sequence_length=16)
    assert served["logits"].shape == (3, 3) and "probabilities" in served and "label_name" in served


@pytest.mark.slow(reason="the runner trains an ensemble of two")
@pytest.mark.tensorflow_only
def test_run_classifier_ensemble_keeps_every_member_and_saves_one_model(tmp_path):
    import csv
    import json

    from processes import run_script

    from bertlayers.convert import load_model_file
    from bertlayers.utils.assets import rotten_tomatoes_snippets

    snippets = rotten_tomatoes_snippets()
    for file, rows in (("train.csv", snippets[:48]), ("eval.csv", snippets[2000:2032])):
        with open(tmp_path / file, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([("text", "label"), *rows])
    out = tmp_path / "ensemble"
    run_script(
        "run_classifier.py",
        *("--train_file", tmp_path / "train.csv", "--eval_file", tmp_path / "eval.csv", "--ensemble", 2),
        *("--init", _tiny_encoder_file(tmp_path)),
        *("--output_dir", out, "--epochs", 1, "--batch_size", 16, "--sequence_length", 32, "--verbose", 0),
    )
    metrics = json.load(open(out / "metrics.json"))
    assert metrics["ensemble_seeds"] == [0, 1] and len(metrics["member_accuracies"]) == 2
    assert os.path.getsize(out / "ensemble.png") > 0  # the ensemble beside its members
    assert os.path.isfile(out / "member_0" / "model.keras") and os.path.isfile(out / "member_1" / "model.keras")
    model = load_model_file(str(out / "model.keras"))
    assert isinstance(model, ClassifierEnsemble) and model.label_names == ["fresh", "rotten"]


@pytest.mark.parametrize(
    "flags, message",
    [
        (("--ensemble", 2, "--restarts", 2, "--dev_file", "DEV"), "give one of them"),
        (("--ensemble", 0), "argument --ensemble: must be an int with 1 <= value"),
        (("--ensemble", 2, "--regression"), "a regression has none"),
    ],
)
def test_bad_ensemble_flags_are_refused_by_name(tmp_path, flags, message):
    from processes import script_result

    for name in ("train.csv", "eval.csv", "dev.csv"):
        (tmp_path / name).write_text("text,label\nfine,1\n")
    result = script_result(
        "run_classifier.py",
        *("--train_file", tmp_path / "train.csv", "--eval_file", tmp_path / "eval.csv"),
        *("--output_dir", tmp_path / "out", *[tmp_path / "dev.csv" if flag == "DEV" else flag for flag in flags]),
        expect=2,
    )
    assert message in result.stderr and not (tmp_path / "out").exists()


def _taggers(count=2, **settings):
    keras.utils.set_random_seed(3)
    return [TokenClassifier(BertEncoder(**TINY), 4, name=f"tagger_{k}", **settings) for k in range(count)]


def test_an_ensemble_of_taggers_averages_each_tokens_probabilities():
    members = _taggers()
    ensemble = ClassifierEnsemble(members)
    batch = encoder_batch(100)
    probabilities = _softmax(np.asarray(ensemble(batch)["logits"]))  # [B, S, 4]
    mean = np.mean([_softmax(np.asarray(m(batch)["logits"])) for m in members], axis=0)
    np.testing.assert_allclose(probabilities, mean, atol=1e-6)
    with pytest.raises(ValueError, match="a CRF tagger answers with its best tag path"):
        ClassifierEnsemble(_taggers(crf=True))


@pytest.mark.tensorflow_only
@pytest.mark.slow(reason="the ensemble's export path of the classifier and span cases, with a tagger's outputs")
def test_an_ensemble_of_taggers_serves_tags():
    from bertlayers.testing import check_served_equals_keras

    ensemble = ClassifierEnsemble(_taggers())
    served = check_served_equals_keras(ensemble, encoder_batch(100), sequence_length=16)
    np.testing.assert_array_equal(served["tags"], served["logits"].argmax(-1))
    assert "probabilities" not in served


def test_run_ner_refuses_an_ensemble_of_crf_taggers(tmp_path):
    from processes import script_result

    (tmp_path / "s.conll").write_text("Paris B-loc\nis O\n")
    result = script_result(
        "run_ner.py",
        *("--train_file", tmp_path / "s.conll", "--eval_file", tmp_path / "s.conll"),
        *("--output_dir", tmp_path / "out", "--ensemble", 2, "--crf"),
        expect=2,
    )
    assert "a CRF answers with its best tag path" in result.stderr and not (tmp_path / "out").exists()


@pytest.mark.slow(reason="the tagging runner trains an ensemble of two")
@pytest.mark.tensorflow_only
def test_run_ner_ensemble_tags_with_the_members_mean(tmp_path):
    import json

    from processes import run_script

    from bertlayers.convert import load_model_file
    from bertlayers.task_data.ner import read_conll, write_conll
    from bertlayers.utils.assets import asset_path

    sentences = read_conll(asset_path("wnut16"))
    write_conll(str(tmp_path / "train.conll"), sentences[:48])
    write_conll(str(tmp_path / "eval.conll"), sentences[:32])  # tags the training sentences know
    out = tmp_path / "ensemble"
    run_script(
        "run_ner.py",
        *("--train_file", tmp_path / "train.conll", "--eval_file", tmp_path / "eval.conll", "--ensemble", 2),
        *("--init", _tiny_encoder_file(tmp_path)),
        *("--output_dir", out, "--epochs", 1, "--batch_size", 16, "--sequence_length", 32, "--verbose", 0),
    )
    metrics = json.load(open(out / "metrics.json"))
    assert metrics["ensemble_seeds"] == [0, 1] and "f1" in metrics
    model = load_model_file(str(out / "model.keras"))
    assert isinstance(model, ClassifierEnsemble) and all(isinstance(m, TokenClassifier) for m in model.members)


def _span_batch():
    """[CLS] q q [SEP] c c c [SEP] [PAD]: answers in the context (positions 4-6) or at [CLS]."""
    token_ids = np.array([[2, 11, 12, 3, 21, 22, 23, 3, 0], [2, 13, 3, 24, 25, 26, 27, 3, 0]], dtype="int32")
    segment_ids = np.array([[0, 0, 0, 0, 1, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1, 1, 1, 0]], dtype="int32")
    span_mask = np.array([[1, 0, 0, 0, 1, 1, 1, 0, 0], [1, 0, 0, 1, 1, 1, 1, 0, 0]], dtype="int32")
    return {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "padding_mask": (token_ids != 0).astype("int32"),
    }, span_mask


def _span_predictors(count=2):
    from bertlayers.models import SpanPredictor

    return _seeded(SpanPredictor, count)


def test_an_ensemble_of_span_predictors_averages_start_and_end_probabilities():
    members = _span_predictors()
    ensemble = ClassifierEnsemble(members)
    ids, span_mask = _span_batch()
    batch = {**ids, "span_mask": span_mask}
    answered = {name: np.asarray(value) for name, value in ensemble(batch).items()}
    assert sorted(answered) == ["end_logits", "start_logits"]
    for name in ("start_logits", "end_logits"):  # a softmax over the positions, each apart
        mean = np.mean([_softmax(np.asarray(m(batch)[name], dtype="float64")) for m in members], axis=0)
        np.testing.assert_allclose(np.exp(answered[name]), mean, atol=1e-6)
        assert np.exp(answered[name])[span_mask == 0].max() < 1e-9  # no answer outside the span mask


@pytest.mark.tensorflow_only
def test_an_ensemble_of_span_predictors_serves_what_keras_computes():
    from bertlayers.testing import served_outputs

    ensemble = ClassifierEnsemble(_span_predictors())
    ids, span_mask = _span_batch()  # the ids signature derives the span mask from the second segment
    served = served_outputs(ensemble, ids, sequence_length=16)
    computed = ensemble.predict({**ids, "span_mask": span_mask}, verbose=0)
    for name in ("start_logits", "end_logits"):
        real = span_mask == 1
        np.testing.assert_allclose(served[name][real], computed[name][real], atol=1e-5)


def _choice_models(count=2):
    from bertlayers.models import MultipleChoice

    return _seeded(MultipleChoice, count)


def _choice_batch():
    pairs = encoder_batch(100)  # 3 pairs a question: [B, C, S] = [2, 3, S]
    return pairs, {name: np.stack([value, value[::-1]]) for name, value in pairs.items()}


def test_an_ensemble_of_multiple_choice_models_averages_over_the_choices():
    members = _choice_models()
    ensemble = ClassifierEnsemble(members)
    _, questions = _choice_batch()
    probabilities = _softmax(np.asarray(ensemble(questions)["logits"]))  # [2, 3]
    mean = np.mean([_softmax(np.asarray(m(questions)["logits"])) for m in members], axis=0)
    np.testing.assert_allclose(probabilities, mean, atol=1e-6)


@pytest.mark.slow
@pytest.mark.tensorflow_only
def test_a_multiple_choice_ensemble_serves_member_scores_the_client_averages_to_its_answer():
    from bertlayers.testing import served_outputs

    ensemble = ClassifierEnsemble(_choice_models())
    _, questions = _choice_batch()  # [2, 3, S]
    pairs = {name: value.reshape(-1, value.shape[-1]) for name, value in questions.items()}  # a pair a row
    scores = served_outputs(ensemble, pairs, sequence_length=16)["member_scores"]  # [6 pairs, 2 members]
    # The client: each member's softmax over a question's choices, averaged over the members.
    by_member = scores.reshape(2, 3, 2).transpose(0, 2, 1)  # [questions, members, choices]
    expected = _softmax(np.asarray(ensemble(questions)["logits"]))
    np.testing.assert_allclose(_softmax(by_member).mean(1), expected, atol=1e-5)


def test_members_of_different_tasks_are_refused_by_name():
    with pytest.raises(ValueError, match="must take the same named inputs"):
        ClassifierEnsemble([_span_predictors(1)[0], _members(1)[0]])


@pytest.mark.slow
@pytest.mark.tensorflow_only
def test_an_ensemble_of_multi_task_models_averages_and_serves_every_head():
    from bertlayers.models import MultiTask, Task
    from bertlayers.testing import served_outputs

    tasks = {"sentiment": Task("classification", 2, label_names=["rotten", "fresh"]), "places": Task("tagging", 3)}
    members = _seeded(lambda encoder: MultiTask(encoder, tasks))
    ensemble = ClassifierEnsemble(members)
    batch = encoder_batch(100)
    answered = ensemble.predict_on_batch(batch)
    for task in tasks:  # per example for the classifier, per token for the tagger
        mean = np.mean([_softmax(np.asarray(m.predict_on_batch(batch)[task], dtype="float64")) for m in members], 0)
        np.testing.assert_allclose(np.exp(answered[task]), mean, atol=1e-6)
    served = served_outputs(ensemble, batch, sequence_length=16)
    np.testing.assert_allclose(served["sentiment_probabilities"], np.exp(answered["sentiment"]), atol=1e-5)
    assert [n.decode() for n in served["sentiment_label_name"]] == [
        ["rotten", "fresh"][i] for i in answered["sentiment"].argmax(-1)
    ]
    np.testing.assert_array_equal(served["places_tags"], answered["places"].argmax(-1))


@pytest.mark.parametrize("runner", ["run_squad.py", "run_multiple_choice.py", "run_multi_task.py"])
def test_every_runner_refuses_an_ensemble_of_no_models(tmp_path, runner):
    from processes import script_result

    needed = {
        "run_squad.py": (),
        "run_multiple_choice.py": ("--train_file", tmp_path / "c.jsonl", "--eval_file", tmp_path / "c.jsonl"),
        "run_multi_task.py": ("--classification", f"a={tmp_path / 'a.csv'},{tmp_path / 'a.csv'}"),
    }[runner]
    result = script_result(runner, *needed, "--output_dir", tmp_path / "out", "--ensemble", 0, expect=2)
    assert "argument --ensemble: must be an int with 1 <= value, got 0" in result.stderr
    assert not (tmp_path / "out").exists()

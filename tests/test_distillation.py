"""Knowledge distillation: the Distiller's losses against their definitions, training through
`fit`, and examples/distill.py end to end on tiny models."""

import json
import os

import keras
import numpy as np
import pytest

from bertlayers.families.bert import BertEncoder
from bertlayers.models import Distiller, SequenceClassifier, TokenClassifier

TINY = dict(
    vocabulary_size=30522, num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64, max_sequence_length=32
)
rng = np.random.default_rng(0)


def inputs(batch=4, seq=6):
    return {
        "token_ids": rng.integers(1, 1000, (batch, seq)).astype("int32"),
        "segment_ids": np.zeros((batch, seq), "int32"),
        "padding_mask": np.ones((batch, seq), "int32"),
    }


def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


@pytest.mark.parametrize("soft_loss, hard_label_weight", [("kl", 0.0), ("mse", 0.0), ("kl", 0.3)])
def test_losses_follow_their_definitions(soft_loss, hard_label_weight):
    student = SequenceClassifier(BertEncoder(**TINY), 3)
    distiller = Distiller(student, temperature=3.0, soft_loss=soft_loss, hard_label_weight=hard_label_weight)
    z_s, z_t = rng.normal(size=(5, 3)).astype("float32"), 4 * rng.normal(size=(5, 3)).astype("float32")
    labels = np.array([0, 2, 1, 1, 0])
    loss = distiller.compute_loss(y={"teacher_logits": z_t, "labels": labels}, y_pred={"logits": z_s})
    if soft_loss == "kl":
        p_t = np.exp(log_softmax(z_t / 3))
        soft = 9 * np.mean(np.sum(p_t * (log_softmax(z_t / 3) - log_softmax(z_s / 3)), -1))
    else:
        soft = np.mean((z_s - z_t) ** 2)
    hard = -np.mean(log_softmax(z_s)[np.arange(5), labels])
    np.testing.assert_allclose(loss, (1 - hard_label_weight) * soft + hard_label_weight * hard, rtol=1e-5)


def test_token_level_loss_counts_only_weighted_tokens():
    student = TokenClassifier(BertEncoder(**TINY), 3)
    distiller = Distiller(student, soft_loss="mse")
    z_s, z_t = np.zeros((2, 4, 3), "float32"), np.ones((2, 4, 3), "float32")
    z_t[:, 2:] = 10.0  # padding: must not count
    weights = np.array([[1, 1, 0, 0], [1, 1, 0, 0]], "float32")
    loss = distiller.compute_loss(y={"teacher_logits": z_t}, y_pred={"logits": z_s}, sample_weight=weights)
    np.testing.assert_allclose(loss, 1.0, rtol=1e-6)


@pytest.mark.slow
def test_student_learns_the_teacher_which_stays_frozen(tmp_path):
    teacher = SequenceClassifier(BertEncoder(**{**TINY, "num_layers": 2}), 2, dropout=0.0)
    # A teacher with a clear opinion per input: its head's logits scaled up.
    teacher.head.output_dense.kernel.assign(20 * np.asarray(teacher.head.output_dense.kernel))
    student = SequenceClassifier(BertEncoder(**TINY), 2, dropout=0.0)
    distiller = Distiller(student, teacher, temperature=1.0)
    assert {id(v) for v in distiller.trainable_variables} == {id(v) for v in student.trainable_variables}
    teacher_before = [np.asarray(w).copy() for w in teacher.weights]
    x = inputs(batch=64)
    distiller.compile(optimizer=keras.optimizers.Adam(3e-3))
    history = distiller.fit(x, epochs=12, batch_size=16, verbose=0).history
    assert history["soft_loss"][-1] < 0.5 * history["soft_loss"][0]
    assert history["agreement"][-1] > 0.9
    assert all(np.array_equal(a, np.asarray(w)) for a, w in zip(teacher_before, teacher.weights))
    # Precomputed soft targets train without running the teacher.
    targets = distiller.soft_targets(x, verbose=0)
    np.testing.assert_allclose(targets, teacher.predict(x, verbose=0)["logits"], atol=1e-6)
    distiller.save(str(tmp_path / "d.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "d.keras"))
    np.testing.assert_allclose(
        loaded.predict(x, verbose=0)["logits"], student.predict(x, verbose=0)["logits"], atol=1e-5
    )
    assert len(loaded.trainable_variables) == len(student.trainable_variables)


def test_bad_settings_are_named():
    student = SequenceClassifier(BertEncoder(**TINY), 2)
    with pytest.raises(ValueError, match="different numbers of classes: 2 vs 3"):
        Distiller(student, SequenceClassifier(BertEncoder(**TINY), 3))
    with pytest.raises(ValueError, match="same token ids: vocabulary sizes 30522 \\(student\\) and 500"):
        Distiller(student, SequenceClassifier(BertEncoder(**{**TINY, "vocabulary_size": 500}), 2))
    with pytest.raises(ValueError, match="Unknown soft_loss"):
        Distiller(student, soft_loss="cosine")
    with pytest.raises(ValueError, match="needs y\\['teacher_logits'\\]"):
        Distiller(student).compute_loss(y=None, y_pred={"logits": np.zeros((1, 2), "float32")})


@pytest.mark.slow(reason="the distillation script three times: teacher, students, timed exports")
def test_distill_example_end_to_end(tmp_path):
    from processes import run_script, script_result

    teacher = SequenceClassifier(BertEncoder(**TINY), 2, label_names=["neg", "pos"])
    teacher.save(str(tmp_path / "teacher.keras"))
    rows = "".join(
        f"{'good fine great' if i % 2 else 'bad awful poor'} film {i},{'pos' if i % 2 else 'neg'}\n" for i in range(48)
    )
    (tmp_path / "train.csv").write_text("text,label\n" + rows)
    out = tmp_path / "out"

    def arguments(sequence_length, latency_requests):
        return [
            "--teacher",
            str(tmp_path / "teacher.keras"),
            "--train_file",
            str(tmp_path / "train.csv"),
            "--eval_file",
            str(tmp_path / "train.csv"),
            "--labelled_examples",
            "16",
            "--epochs",
            "1",
            "--batch_size",
            "16",
            "--sequence_length",
            str(sequence_length),
            "--latency_requests",
            str(latency_requests),
            "--output_dir",
            str(out),
            "--verbose",
            "0",
        ]

    # No latency requests: no export at all, the accuracies written.
    output = run_script("distill.py", *arguments(16, 0))
    assert "16 labelled examples, 32 unlabelled transfer texts, 48 held out" in output
    metrics = json.load(open(out / "metrics.json"))
    assert {"teacher", "direct_random", "distilled_random"} <= set(metrics)
    assert metrics["direct_random"]["epochs"] == 3  # the same steps as the distilled student's epoch
    student = SequenceClassifier(BertEncoder.from_preset("bert_tiny"), 2)
    assert metrics["distilled_random"]["parameters"] == sum(int(np.prod(w.shape)) for w in student.weights)
    assert "batch1_p50_ms" not in metrics["teacher"] and not os.path.exists(out / "savedmodels")
    # Again into the finished run's folder: refused, unless asked to overwrite it. Texts longer than
    # the sequence length are cut in the timed exports as in training (they ended the run in an error).
    refused = script_result("distill.py", *arguments(5, 3), expect=2).stderr
    assert "holds a finished run" in refused and json.load(open(out / "metrics.json")) == metrics
    run_script("distill.py", *arguments(5, 3), "--overwrite")
    again = json.load(open(out / "metrics.json"))
    assert again["settings"]["sequence_length"] == 5
    assert again["teacher"]["batch1_p50_ms"] > 0 and again["distilled_random"]["batch1_p50_ms"] > 0
    assert os.path.isdir(out / "savedmodels" / "student_text" / "1")

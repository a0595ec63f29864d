"""Multi-task fine-tuning: one encoder run for every head, each example training its own task only
(its loss and metrics by hand), loss weights, saving (under both backends), the export serving
every head (equal to Keras), and the runner end to end."""

import json

import keras
import numpy as np
import pytest
from processes import run_script

from bertlayers.families.bert import BertEncoder
from bertlayers.models import MultiTask, Task
from bertlayers.task_data.multi_task import mix_tasks
from bertlayers.tokenizers import bert_uncased_vocabulary, model_tokenizer

TINY = dict(
    vocabulary_size=30522, num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64, max_sequence_length=64
)
TASKS = {
    "sentiment": Task("classification", label_names=["rotten", "fresh"]),
    "topic": Task("classification", 5, loss_weight=0.5),
    "tags": Task("tagging", 3),
}


def inputs(rows, seq=8, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, 2000, (rows, seq)).astype("int32")
    ids[:, rng.integers(4, seq) :] = 0
    return {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": (ids != 0).astype("int32")}


def task_data(seed=0):
    rng = np.random.default_rng(seed)
    tagged = inputs(3, seed=seed + 2)
    return {
        "sentiment": (inputs(4, seed=seed), rng.integers(0, 2, 4), None),
        "topic": (inputs(2, seed=seed + 1), rng.integers(0, 5, 2), None),
        "tags": (tagged, rng.integers(0, 3, (3, 8)), tagged["padding_mask"].astype("float32")),
    }


def test_mix_tasks_gives_each_example_its_own_tasks_labels_and_weight_zero_elsewhere():
    data = task_data()
    x, y, weights = mix_tasks(data)
    assert x["token_ids"].shape == (9, 8)
    np.testing.assert_array_equal(weights["sentiment"], [1, 1, 1, 1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(weights["topic"], [0, 0, 0, 0, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(weights["tags"][:6], 0)
    np.testing.assert_array_equal(weights["tags"][6:], data["tags"][2])
    np.testing.assert_array_equal(y["topic"][4:6], data["topic"][1])
    np.testing.assert_array_equal(y["tags"][6:], data["tags"][1])
    with pytest.raises(ValueError, match="one sequence length"):
        mix_tasks({"a": (inputs(2, seq=8), [0, 1], None), "b": (inputs(2, seq=6), [0, 1], None)})
    with pytest.raises(ValueError, match="Task 'a': 3 labels for 2 examples"):
        mix_tasks({"a": (inputs(2), [0, 1, 1], None)})


def cross_entropy(logits, labels):
    logits = logits - logits.max(-1, keepdims=True)
    return -np.take_along_axis(logits - np.log(np.exp(logits).sum(-1, keepdims=True)), labels[..., None], -1)[..., 0]


def test_the_loss_sums_each_tasks_own_examples_by_their_weights_and_metrics_count_them_alone():
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(**TINY, dropout=0.0)
    model = MultiTask(encoder, TASKS, dropout=0.0)
    x, y, weights = mix_tasks(task_data())
    model.compile(optimizer="sgd")
    results = model.evaluate(x, y, sample_weight=weights, batch_size=9, verbose=0, return_dict=True)
    logits = model.predict_on_batch(x)
    # Keras's mean over the batch (every token position for the tagger), the other tasks' rows at weight 0.
    expected = {task: (cross_entropy(logits[task], y[task]) * weights[task]).mean() for task in TASKS}
    np.testing.assert_allclose(
        results["loss"], expected["sentiment"] + 0.5 * expected["topic"] + expected["tags"], rtol=1e-5
    )
    own = weights["sentiment"] > 0
    np.testing.assert_allclose(
        results["sentiment_accuracy"], (logits["sentiment"][own].argmax(-1) == y["sentiment"][own]).mean(), atol=1e-6
    )
    tagged = weights["tags"] > 0
    np.testing.assert_allclose(
        results["tags_accuracy"], (logits["tags"].argmax(-1) == y["tags"])[tagged].mean(), atol=1e-6
    )


def test_one_encoder_run_feeds_every_head_and_a_task_trains_only_on_its_examples():
    model = MultiTask(BertEncoder(**TINY), TASKS)
    calls = [layer for layer in model.layers if layer is model.encoder]
    assert len(calls) == 1 and len(model.encoder._inbound_nodes) == 1  # the encoder is called once
    x, y, weights = mix_tasks(task_data())
    model.compile(optimizer=keras.optimizers.SGD(0.1))
    topic = model.heads["topic"].get_weights()
    rows = weights["topic"] == 0  # a batch without topic examples: the topic head gets no gradient
    model.fit(
        {k: v[rows] for k, v in x.items()},
        {k: v[rows] for k, v in y.items()},
        sample_weight={k: v[rows] for k, v in weights.items()},
        batch_size=8,
        epochs=1,
        verbose=0,
    )
    for before, after in zip(topic, model.heads["topic"].get_weights()):
        np.testing.assert_array_equal(before, after)
    assert not np.allclose(
        model.heads["sentiment"].get_weights()[0],
        MultiTask(BertEncoder(**TINY), TASKS).heads["sentiment"].get_weights()[0],
    )


@pytest.mark.parametrize(
    "tasks, message",
    [
        ({}, "at least one task"),
        ({"bad name": Task("tagging", 3)}, "Task name 'bad name'"),
        ({"a": {"kind": "ranking", "num_classes": 2}}, "kind is one of classification, tagging"),
        ({"a": {"kind": "tagging"}}, "needs num_classes"),
        ({"a": {"kind": "tagging", "num_classes": 2, "loss_weight": 0}}, "loss_weight must be > 0"),
    ],
)
def test_bad_tasks_are_named(tasks, message):
    with pytest.raises(ValueError, match=message):
        MultiTask(BertEncoder(**TINY), tasks)


def test_saved_and_loaded_the_heads_and_tasks_are_the_same(tmp_path):
    model = MultiTask(BertEncoder(**TINY), TASKS)
    model.save(str(tmp_path / "model.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "model.keras"))
    assert loaded.tasks == model.tasks
    x = inputs(3)
    expected = model.predict_on_batch(x)
    for task in TASKS:
        np.testing.assert_allclose(loaded.predict_on_batch(x)[task], expected[task], atol=1e-6)


@pytest.mark.tensorflow_only
@pytest.mark.slow
def test_the_export_serves_every_head_equal_to_keras(tmp_path):
    import tensorflow as tf

    from bertlayers.export import export_for_serving

    model = MultiTask(BertEncoder(**TINY), TASKS)
    texts = ["a fine film about london", "shares fell in tokyo"]
    packed = model_tokenizer(bert_uncased_vocabulary()).packer(16)(texts)
    expected = model.predict_on_batch(packed)
    paths = export_for_serving(
        model, "multi", base_dir=str(tmp_path), vocabulary=bert_uncased_vocabulary(), sequence_length=16
    )
    served = tf.saved_model.load(paths["multi_text"]).signatures["serving_default"](text=tf.constant(texts))
    served = {k: v.numpy() for k, v in served.items()}
    np.testing.assert_allclose(
        served["sentiment_probabilities"], tf.nn.softmax(expected["sentiment"]).numpy(), atol=1e-5
    )
    assert [n.decode() for n in served["sentiment_label_name"]] == [
        ["rotten", "fresh"][i] for i in expected["sentiment"].argmax(-1)
    ]
    np.testing.assert_array_equal(served["topic_label"], expected["topic"].argmax(-1))
    length = served["tags_tags"].shape[1]  # the text model packs to the longest request
    np.testing.assert_array_equal(served["tags_tags"], expected["tags"].argmax(-1)[:, :length])
    np.testing.assert_array_equal(served["token_ids"], packed["token_ids"][:, :length])
    np.testing.assert_allclose(served["tags_logits"], expected["tags"][:, :length], atol=1e-5)


@pytest.mark.tensorflow_only
@pytest.mark.slow(reason="the multi-task runner end to end")
def test_run_multi_task_end_to_end(tmp_path):
    encoder = tmp_path / "encoder.keras"
    BertEncoder(**TINY).save(str(encoder))
    sentiment = tmp_path / "sentiment.csv"
    sentiment.write_text(
        "text,label\n"
        + "".join(f"a {w} film number {i},{l}\n" for i in range(6) for w, l in (("good", "fresh"), ("bad", "rotten")))
    )
    topic = tmp_path / "topic.csv"
    topic.write_text(
        "text,label\n" + "".join(f"news of {t} {i},{t}\n" for i in range(4) for t in ("sport", "tech", "politics"))
    )
    tags = tmp_path / "tags.conll"
    tags.write_text("".join(f"Paris B-loc\nis O\nbig O\n{i} O\n\n" for i in range(8)))
    out = tmp_path / "out"
    output = run_script(
        "run_multi_task.py",
        "--classification",
        f"sentiment={sentiment},{sentiment}",
        "--classification",
        f"topic={topic},{topic}",
        "--tagging",
        f"places={tags},{tags}",
        "--loss_weight",
        "topic=0.5",
        "--init",
        str(encoder),
        "--output_dir",
        str(out),
        "--sequence_length",
        "16",
        "--batch_size",
        "8",
        "--verbose",
        "0",
        "--ensemble",
        "2",
    )
    metrics = json.load(open(out / "metrics.json"))
    assert set(metrics["tasks"]) == {"sentiment", "topic", "places"}
    assert 0 <= metrics["tasks"]["sentiment"]["accuracy"] <= 1 and "f1" in metrics["tasks"]["places"]
    assert (
        metrics["ensemble_seeds"] == [0, 1] and [set(m) for m in metrics["member_tasks"]] == [set(metrics["tasks"])] * 2
    )
    loaded = keras.saving.load_model(str(out / "model.keras"))  # the ensemble, its tasks its members'
    assert [type(member).__name__ for member in loaded.members] == ["MultiTask"] * 2
    assert loaded.tasks["topic"].loss_weight == 0.5 and loaded.tasks["places"].label_names == ("O", "B-loc")
    assert "12 sentiment, 12 topic and 8 places training examples" in output

"""Multiple choice: the next-sentence set's construction, the model's scores per (context, choice)
pair, its export (served as the pair scorer, equal to the model's logits) and its runner."""

import json

import keras
import numpy as np
import pytest
from processes import run_script

from bertlayers.families.bert import BertEncoder
from bertlayers.models import MultipleChoice
from bertlayers.task_data.multiple_choice import encode_choices, next_sentence_choices, read_choices, write_choices
from bertlayers.tokenizers import bert_uncased_vocabulary, model_tokenizer

TINY = dict(
    vocabulary_size=30522, num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64, max_sequence_length=64
)
ARTICLES = [
    [f"Article one sentence number {i} goes here." for i in range(6)],
    [f"Article two line {i} has five words." for i in range(5)] + ["Too short."],
    ["Only three sentences here today.", "A second one of them now.", "And the third one at last."],
]


def test_next_sentence_choices_hold_the_true_next_sentence_and_same_article_distractors(tmp_path):
    examples = next_sentence_choices(ARTICLES, num_choices=4, seed=3)
    # Article one: 5 pairs; two: 4 pairs of its five long sentences (the short one is left out);
    # three: too few other sentences for 3 distractors.
    assert len(examples) == 9
    for example in examples:
        article = next(a for a in ARTICLES if example.context in a)
        assert article[article.index(example.context) + 1] == example.choices[example.label]
        assert all(c in article and c != example.context for c in example.choices) and len(set(example.choices)) == 4
    assert len({e.label for e in examples}) > 1  # the right answer's place varies
    assert next_sentence_choices(ARTICLES, seed=3) == examples  # fixed by the seed
    write_choices(str(tmp_path / "set.jsonl"), examples)
    assert read_choices(str(tmp_path / "set.jsonl")) == examples


@pytest.mark.parametrize(
    "line, message",
    [
        (
            '{"context": "a", "choices": ["b", "c"], "label": 2}',
            r"bad.jsonl:1: label must index the choices \(0 to 1\), got 2",
        ),
        (
            '{"context": "a", "choices": ["b"], "label": 0}',
            "bad.jsonl:1: choices must be a list of at least two strings",
        ),
        ('{"context": "a", "label": 0}', r"bad.jsonl:1: expected \{\"context\""),
    ],
)
def test_a_bad_line_is_named(tmp_path, line, message):
    (tmp_path / "bad.jsonl").write_text(line + "\n")
    with pytest.raises(ValueError, match=message):
        read_choices(str(tmp_path / "bad.jsonl"))


@pytest.fixture(scope="module")
def choice_model():
    keras.utils.set_random_seed(0)
    model = MultipleChoice(BertEncoder(**TINY))
    examples = next_sentence_choices(ARTICLES, seed=0)
    inputs, labels = encode_choices(model_tokenizer(bert_uncased_vocabulary()).packer(32), examples)
    return model, examples, inputs, labels


def test_each_choice_is_scored_as_its_own_sentence_pair(choice_model):
    model, examples, inputs, labels = choice_model
    assert inputs["token_ids"].shape == (9, 4, 32) and (inputs["segment_ids"].max(-1) == 1).all()
    logits = model.predict_on_batch(inputs)["logits"]  # [9, 4]
    for row in (0, 5):
        for choice in range(4):
            pair = {name: value[row : row + 1, choice] for name, value in inputs.items()}
            np.testing.assert_allclose(
                model.scorer.predict_on_batch(pair)["logits"][0, 0], logits[row, choice], atol=1e-5
            )
    model.compile(keras.optimizers.Adam(3e-3))
    history = model.fit(inputs, {"logits": labels}, epochs=15, batch_size=9, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    # Inputs without the choices axis are refused by name and shape.
    with pytest.raises(ValueError, match=r"token_ids must have rank 3 \(\[batch, \?, \?\]\), got shape \(9, 32\)"):
        model({name: value[:, 0] for name, value in inputs.items()})


@pytest.mark.parametrize(
    "pooling",
    [
        "pooler",
        pytest.param("mean", marks=pytest.mark.slow(reason="the served path of the pooler case, another scorer")),
    ],
)
def test_the_served_pair_scores_equal_the_models_logits(choice_model, tmp_path, pooling):
    import tensorflow as tf

    from bertlayers.export import export_for_serving

    model, examples, inputs, _ = choice_model
    if pooling != "pooler":  # the scorer reads the pair's mean over its real tokens, not the pooler
        model = MultipleChoice(BertEncoder(**TINY), pooling=pooling)
        assert not model.uses_pooled_output and model.scorer.pooling == pooling
    paths = export_for_serving(
        model, "choice", base_dir=str(tmp_path), vocabulary=bert_uncased_vocabulary(), sequence_length=32
    )
    served = tf.saved_model.load(paths["choice_text"]).signatures["text_pair"](
        text_a=tf.constant([e.context for e in examples for _ in e.choices]),
        text_b=tf.constant([c for e in examples for c in e.choices]),
    )
    np.testing.assert_allclose(
        served["score"].numpy().reshape(9, 4), model.predict_on_batch(inputs)["logits"], atol=1e-5
    )


@pytest.mark.slow(reason="the multiple-choice runner end to end")
def test_run_multiple_choice_end_to_end(tmp_path):
    encoder = tmp_path / "encoder.keras"
    BertEncoder(**TINY).save(str(encoder))
    data = tmp_path / "set.jsonl"
    write_choices(str(data), next_sentence_choices(ARTICLES, seed=0))
    out = tmp_path / "out"
    output = run_script(
        "run_multiple_choice.py",
        "--train_file",
        str(data),
        "--eval_file",
        str(data),
        "--init",
        str(encoder),
        "--output_dir",
        str(out),
        "--sequence_length",
        "32",
        "--batch_size",
        "4",
        "--verbose",
        "0",
        "--ensemble",
        "2",
        "--scorer",
        "cross",
    )
    metrics = json.load(open(out / "metrics.json"))
    assert metrics["chance"] == 0.25 and metrics["eval_examples"] == 9 and 0 <= metrics["untuned_cosine_accuracy"] <= 1
    assert metrics["ensemble_seeds"] == [0, 1] and len(metrics["member_accuracies"]) == 2
    members = keras.saving.load_model(str(out / "model.keras")).members
    assert [member.scorer is not None for member in members] == [True, True]
    assert "9 training and 9 evaluation examples, 4 choices each" in output and metrics["scorer"] == "cross"


def test_the_similarity_scorer_starts_as_the_untuned_cosine_and_is_served_as_its_embedder(tmp_path):
    """scorer="similarity": logits = 20 · cos(context, choice) of the embedder's vectors, so the
    untrained model picks what the encoder's embeddings pick; it trains, saves and loads, and its
    served text model is the embedder."""
    import tensorflow as tf

    from bertlayers.export import export_for_serving
    from bertlayers.models import SentenceEmbedder

    keras.utils.set_random_seed(1)
    model = MultipleChoice(BertEncoder(**TINY), scorer="similarity")
    examples = next_sentence_choices(ARTICLES, seed=0)
    packer = model_tokenizer(bert_uncased_vocabulary()).packer(32)
    inputs, labels = encode_choices(packer, examples, "similarity")
    assert inputs["token_ids"].shape == (9, 5, 32) and not inputs["segment_ids"].any()  # context + 4 choices, alone
    logits = model.predict_on_batch(inputs)["logits"]  # [9, 4]
    embedder = SentenceEmbedder(model.encoder)  # the same encoder's mean-pooled unit vectors
    contexts = embedder.predict_on_batch(packer([e.context for e in examples]))["embedding"]
    choices = embedder.predict_on_batch(packer([c for e in examples for c in e.choices]))["embedding"]
    cosines = np.einsum("nh,nch->nc", contexts, choices.reshape(9, 4, -1))
    np.testing.assert_allclose(logits, 20 * cosines, atol=1e-4)
    assert not model.uses_pooled_output and model.serving_model() is model.embedder

    model.compile(keras.optimizers.Adam(3e-3))
    history = model.fit(inputs, {"logits": labels}, epochs=10, batch_size=9, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    model.save(str(tmp_path / "choice.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "choice.keras"))
    assert loaded.scorer_kind == "similarity" and loaded.similarity_scale == 20.0
    np.testing.assert_allclose(
        loaded.predict_on_batch(inputs)["logits"], model.predict_on_batch(inputs)["logits"], atol=1e-5
    )

    paths = export_for_serving(
        model, "choice", base_dir=str(tmp_path), vocabulary=bert_uncased_vocabulary(), sequence_length=32
    )
    served = (
        tf.saved_model.load(paths["choice_text"])
        .signatures["serving_default"](text=tf.constant([examples[0].context, *examples[0].choices]))["embedding"]
        .numpy()
    )
    np.testing.assert_allclose(20 * served[1:] @ served[0], model.predict_on_batch(inputs)["logits"][0], atol=1e-4)
    with pytest.raises(ValueError, match='pooling "mean", "first" or "max", not the pooler'):
        MultipleChoice(BertEncoder(**TINY), scorer="similarity", pooling="pooler")


def test_an_ensemble_of_similarity_scorers_is_refused_for_serving_by_name():
    from bertlayers.models import ClassifierEnsemble

    members = [MultipleChoice(BertEncoder(**TINY), scorer="similarity", name=f"member_{k}") for k in range(2)]
    with pytest.raises(ValueError, match=r"export each member \(`model.members\[k\]`\) on its own"):
        ClassifierEnsemble(members).serving_model()

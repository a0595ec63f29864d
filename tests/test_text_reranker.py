"""Cross-encoder rerankers: folders sentence-transformers and transformers write score pairs and
rank as sentence-transformers' `CrossEncoder` does (tests/fixtures/record_cross_encoders.py); what
is not a reranker is refused by name; a reranker fits, saves and serves its scores."""

import json
import os
import shutil

import numpy as np
import pytest

from bertlayers.tasks import TextEmbedder, TextReranker

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "cross_encoders")


@pytest.fixture(scope="module")
def reference():
    arrays = np.load(FIXTURES + ".npz")
    texts = {
        "pairs": [(str(q), str(p)) for q, p in arrays["pairs"]],
        "query": str(arrays["query"]),
        "documents": [str(d) for d in arrays["documents"]],
    }
    return arrays, texts


@pytest.mark.parametrize(
    "name, activation", [("st_sigmoid", "sigmoid"), ("st_identity", "identity"), ("hf_plain", "sigmoid")]
)
def test_reranker_folders_score_and_rank_as_sentence_transformers_does(name, activation, reference):
    """A CrossEncoder folder (its activation from config_sentence_transformers.json) and a plain
    one-label BertForSequenceClassification folder (sigmoid, sentence-transformers' default)."""
    arrays, texts = reference
    reranker = TextReranker.from_checkpoint(os.path.join(FIXTURES, name))
    assert reranker.activation == activation
    np.testing.assert_allclose(reranker.predict(texts["pairs"]), arrays[f"{name}.scores"], atol=1e-5)
    ranked = reranker.rank(texts["query"], texts["documents"])
    assert [hit["corpus_id"] for hit in ranked] == list(arrays[f"{name}.rank"])
    assert [hit["corpus_id"] for hit in reranker.rank(texts["query"], texts["documents"], top_k=2)] == list(
        arrays[f"{name}.rank"][:2]
    )


def test_what_is_not_a_reranker_is_refused_by_name(tmp_path, reference):
    _, texts = reference
    with pytest.raises(ValueError, match="holds a SequenceClassifier with 2 labels, not a reranker"):
        TextReranker.from_checkpoint(os.path.join(FIXTURES, "hf_two_labels"))
    with pytest.raises(ValueError, match="CrossEncoder folder.*score pairs with bertlayers.tasks.TextReranker"):
        TextEmbedder.from_checkpoint(os.path.join(FIXTURES, "st_sigmoid"))
    embedder_folder = os.path.join(os.path.dirname(FIXTURES), "sentence_transformers", "sqrt_len")
    with pytest.raises(ValueError, match="SentenceTransformer folder, not a CrossEncoder: embed with"):
        TextReranker.from_checkpoint(embedder_folder)
    relu = tmp_path / "relu"
    shutil.copytree(os.path.join(FIXTURES, "st_sigmoid"), relu)
    settings = json.loads((relu / "config_sentence_transformers.json").read_text())
    settings["activation_fn"] = "torch.nn.modules.activation.ReLU"
    (relu / "config_sentence_transformers.json").write_text(json.dumps(settings))
    with pytest.raises(ValueError, match="activation 'torch.nn.modules.activation.ReLU' has no counterpart"):
        TextReranker.from_checkpoint(str(relu))
    reranker = TextReranker.from_checkpoint(os.path.join(FIXTURES, "st_sigmoid"))
    with pytest.raises(ValueError, match="pair 1 is 'just a string'"):
        reranker.predict([("q", "p"), "just a string"])
    with pytest.raises(ValueError, match=r"labels are relevances in \[0, 1\]; got values from 0.0 to 3.0"):
        reranker.fit(texts["pairs"], [0, 1, 3, 0])
    assert reranker.predict([]).shape == (0,)


@pytest.mark.slow(reason="fine-tunes a reranker, saves it and serves it as a text SavedModel")
def test_a_fine_tuned_reranker_saves_and_serves_its_scores(tmp_path, reference):
    """Binary cross-entropy on the logit lifts the relevant pair's score; the saved reranker keeps
    its activation; the text SavedModel serves `score` (the sigmoid) and `logit` equal to Keras."""
    import tensorflow as tf

    _, texts = reference
    reranker = TextReranker.from_checkpoint(os.path.join(FIXTURES, "st_sigmoid"))
    pairs, labels = texts["pairs"], [1.0, 0.0, 1.0, 0.0]
    before = reranker.predict(pairs)
    history = reranker.fit(pairs * 4, labels * 4, epochs=3, batch_size=4, learning_rate=1e-3, verbose=0)
    after = reranker.predict(pairs)
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert after[0] - after[1] > before[0] - before[1] and after[2] - after[3] > before[2] - before[3]
    reranker.save(str(tmp_path / "reranker.keras"))
    again = TextReranker.load(str(tmp_path / "reranker.keras"))
    assert (again.activation, again.sequence_length) == ("sigmoid", 32)
    np.testing.assert_allclose(again.predict(pairs), after, atol=1e-6)
    paths = reranker.export(str(tmp_path / "savedmodels"), "reranker")
    served = tf.saved_model.load(paths["reranker_text"]).signatures["text_pair"]
    answer = served(text_a=tf.constant([q for q, _ in pairs]), text_b=tf.constant([p for _, p in pairs]))
    np.testing.assert_allclose(answer["score"].numpy(), after, atol=1e-5)
    np.testing.assert_allclose(answer["logit"].numpy(), reranker.logits(pairs), atol=1e-5)

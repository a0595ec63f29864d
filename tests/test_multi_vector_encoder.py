"""Late interaction (ColBERT): sentence-transformers 6 `MultiVectorEncoder` folders encode queries and
documents and score them as it does, the training loss is its ranking loss; trained, saved, loaded
and served as text models, the vectors stay (tests/fixtures/record_multi_vector_encoders.py)."""

import json
import os
import shutil

import numpy as np
import pytest

from bertlayers.layers import maxsim
from bertlayers.models import MultiVectorDualEncoder
from bertlayers.tasks import TextEmbedder, TextMultiVectorEncoder

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "multi_vector_encoders")
LAYOUTS = ("colbert", "attended_expansion", "query_skiplist")


@pytest.fixture(scope="module")
def reference():
    return np.load(FIXTURES + ".npz")


@pytest.fixture(scope="module")
def colbert():
    return TextMultiVectorEncoder.from_checkpoint(os.path.join(FIXTURES, "colbert"))


@pytest.mark.other_backend_cases("colbert")  # under JAX: the expansion rows computed apart from the keys
@pytest.mark.parametrize("name", LAYOUTS)
def test_each_layout_encodes_and_scores_as_sentence_transformers_does(name, reference, colbert):
    """Every scored token of every query and document (the [Q] / [D] markers, [MASK] expansion
    attended or not, the lengths, the skiplists) within 1e-5, on the same tokens, and MaxSim (or
    its mean) of every pair."""
    encoder = colbert if name == "colbert" else TextMultiVectorEncoder.from_checkpoint(os.path.join(FIXTURES, name))
    encodes_as_recorded(encoder, name, reference)


PYLATE = os.path.join(os.path.dirname(FIXTURES), "pylate_folders")


@pytest.mark.parametrize("name", ["unused_markers", "added_markers"])
def test_pylate_checkpoints_encode_and_score_as_sentence_transformers_reads_them(name):
    """ColBERT folders PyLate 1.6 wrote (its Transformer and Dense modules alone, its settings at the
    top of config_sentence_transformers.json, the norms named LayerNorm.gamma / .beta as
    transformers 5.3 saved them) give sentence-transformers 6.2's `MultiVectorEncoder` vectors and
    scores, which equal PyLate's own (tests/fixtures/record_pylate_folders.py): the [unused0] /
    "[Q] " markers one piece each, the [MASK] expansion, the punctuation skiplist, unit vectors."""
    encoder = TextMultiVectorEncoder.from_checkpoint(os.path.join(PYLATE, name))
    marker = "[unused0]" if name == "unused_markers" else "[Q] "
    assert encoder.prompts["query"] == marker and encoder.model.normalize
    encodes_as_recorded(encoder, name, np.load(PYLATE + ".npz"))


def encodes_as_recorded(encoder, name, reference):
    texts = [str(t) for t in reference["texts"]]
    queries, documents = encoder.encode_query(texts), encoder.encode_document(texts)
    for task, vectors in (("query", queries), ("document", documents)):
        inputs = encoder.inputs(texts, task, encoder.prompts.get(task, ""))
        model = encoder.query_model if task == "query" else encoder.model
        masks = model.predict(inputs, verbose=0)["token_mask"] != 0
        ids = inputs["token_ids"]
        if model.expansion is not None:  # the padding turned [MASK], every position scored
            ids = np.where(inputs["padding_mask"] != 0, ids, model.expansion["token_id"])
        for i, rows in enumerate(vectors):
            expected = reference[f"{name}.{task}.{i}"]
            assert rows.shape == expected.shape, (name, task, i, rows.shape, expected.shape)
            np.testing.assert_allclose(rows, expected, atol=1e-5, err_msg=f"{name} {task} {i}")
            np.testing.assert_array_equal(
                ids[i][masks[i]], reference[f"{name}.{task}_ids.{i}"], err_msg=f"{name} {task} {i}"
            )
    np.testing.assert_allclose(encoder.similarity(queries, documents), reference[f"{name}.similarity"], atol=1e-5)


def test_the_training_loss_is_sentence_transformers_multi_vector_ranking_loss(reference, colbert):
    """In-batch negatives on MaxSim (each side expanded, skipped and prompted as it encodes):
    MultiVectorMultipleNegativesRankingLoss on the same batch, 1e-5; the batch's scores are the
    texts' MaxSim."""
    import keras

    dual = MultiVectorDualEncoder(
        colbert.model.encoder,
        colbert.dimension,
        expansion=colbert.query_model.expansion,
        document_skiplist_ids=colbert.model.skiplist_ids,
        projection=colbert.model.projection,
    )
    texts = {
        task: [str(t) for t in reference[key]]
        for task, key in (("query", "loss.queries"), ("document", "loss.documents"))
    }
    x = {}
    for task in texts:
        x.update({f"{task}_{k}": v for k, v in colbert.inputs(texts[task], task, colbert.prompts[task]).items()})
    outputs = dual.predict_on_batch(x)
    encoded = colbert.encode_query(texts["query"]), colbert.encode_document(texts["document"])
    np.testing.assert_allclose(outputs["similarity"], colbert.similarity(*encoded), rtol=1e-5, atol=1e-5)
    dual.compile(keras.optimizers.Adam(1e-3))
    loss = dual.compute_loss(
        x=x, y_pred={"similarity": keras.ops.convert_to_tensor(outputs["similarity"])}, training=False
    )
    np.testing.assert_allclose(float(keras.ops.convert_to_numpy(loss)), reference["loss.value"], rtol=1e-5)


def test_maxsim_is_its_definition():
    """score(q, d) = the sum over q's tokens of their best dot product with d's tokens; the mean
    divides by q's tokens; a text without scored tokens adds nothing."""
    q = [np.array([[1.0, 0.0], [0.0, 1.0]]), np.zeros((0, 2))]
    d = [np.array([[0.5, 0.5], [1.0, -1.0]]), np.array([[0.0, 2.0]])]
    np.testing.assert_allclose(maxsim(q, d), [[1.0 + 0.5, 0.0 + 2.0], [0.0, 0.0]])
    np.testing.assert_allclose(maxsim(q, d, mean=True), [[0.75, 1.0], [0.0, 0.0]])


@pytest.mark.slow(reason="trains a ColBERT model, saves it and exports its documents' and queries' text models")
def test_trained_saved_and_served_the_vectors_stay(tmp_path):
    """A few ColBERT steps raise each query's own document over the others; saved and loaded, the
    queries' and documents' vectors are the same; exported, each text model serves them (zeros at
    the tokens not scored) with their scoring mask, the query's [MASK] expansion done in the graph."""
    import tensorflow as tf

    colbert = TextMultiVectorEncoder.from_checkpoint(os.path.join(FIXTURES, "colbert"))
    queries = ["where is the cat", "a quick fox", "the lazy dog", "what is on the mat"]
    passages = ["a cat sat there", "the quick brown fox", "a lazy old dog", "it is on the mat"]
    margin = lambda s: float(np.mean(np.diag(s) - (s.sum(1) - np.diag(s)) / 3))  # noqa: E731
    before = margin(colbert.similarity(colbert.encode_query(queries), colbert.encode_document(passages)))
    history = colbert.fit(queries * 4, passages * 4, epochs=3, batch_size=4, learning_rate=1e-3, verbose=0)
    after = margin(colbert.similarity(colbert.encode_query(queries), colbert.encode_document(passages)))
    assert np.isfinite(history.history["loss"]).all() and after > before, (before, after)
    texts = ["[Q] where is the cat?", "a quick fox!"]
    queries, documents = colbert.encode_query(texts[:1], prompt=""), colbert.encode_document(texts[1:], prompt="")
    colbert.save(str(tmp_path / "colbert.keras"))
    again = TextMultiVectorEncoder.load(str(tmp_path / "colbert.keras"))
    np.testing.assert_allclose(again.encode_query(texts[:1], prompt="")[0], queries[0], atol=1e-6)
    np.testing.assert_allclose(again.encode_document(texts[1:], prompt="")[0], documents[0], atol=1e-6)
    assert again.similarity_function == "maxsim" and again.query_model.expansion == colbert.query_model.expansion
    paths = colbert.export(str(tmp_path / "savedmodels"), "colbert")
    assert sorted(paths) == ["colbert", "colbert_query", "colbert_query_text", "colbert_text"]
    for model, text, expected in (
        ("colbert_query_text", texts[0], queries[0]),
        ("colbert_text", texts[1], documents[0]),
    ):
        served = tf.saved_model.load(paths[model]).signatures["serving_default"](text=tf.constant([text]))
        mask = served["token_mask"].numpy()[0] != 0
        np.testing.assert_allclose(served["token_embeddings"].numpy()[0][mask], expected, atol=1e-5, err_msg=model)
        assert not served["token_embeddings"].numpy()[0][~mask].any(), model
    assert served["token_embeddings"].shape[1] >= len(documents[0])


def test_what_the_library_cannot_read_is_refused_by_name(tmp_path, colbert):
    with pytest.raises(
        ValueError, match="MultiVectorEncoder folder.*encode with bertlayers.tasks.TextMultiVectorEncoder"
    ):
        TextEmbedder.from_checkpoint(os.path.join(FIXTURES, "colbert"))
    changed = tmp_path / "changed"
    shutil.copytree(os.path.join(FIXTURES, "colbert"), changed)
    settings = json.loads((changed / "sentence_bert_config.json").read_text())
    settings["query_expansion"]["strategy"] = "min"
    (changed / "sentence_bert_config.json").write_text(json.dumps(settings))
    with pytest.raises(ValueError, match=r"query_expansion .*'min'.*fixed length"):
        TextMultiVectorEncoder.from_checkpoint(str(changed))
    pylate = json.loads((changed / "config_sentence_transformers.json").read_text())
    (changed / "config_sentence_transformers.json").write_text(json.dumps({**pylate, "query_prefix": "[unused0]"}))
    with pytest.raises(ValueError, match="not a sentence-transformers 6 MultiVectorEncoder folder.*PyLate"):
        TextMultiVectorEncoder.from_checkpoint(str(changed))
    with pytest.raises(ValueError, match="the library reads a multi-vector model"):
        TextMultiVectorEncoder.from_checkpoint(
            os.path.join(os.path.dirname(FIXTURES), "sparse_encoders", "fill_mask_sum")
        )
    pylate_folder = tmp_path / "pylate"
    shutil.copytree(os.path.join(PYLATE, "unused_markers"), pylate_folder)
    modules = json.loads((pylate_folder / "modules.json").read_text())
    (pylate_folder / "modules.json").write_text(json.dumps([*modules, {**modules[1], "path": "2_Dense"}]))
    with pytest.raises(ValueError, match=r"modules.json: the modules are .*'Dense', 'Dense'.*PyLate"):
        TextMultiVectorEncoder.from_checkpoint(str(pylate_folder))
    with pytest.raises(ValueError, match="task must be one of"):
        colbert.encode(["a"], task="passage")
    with pytest.raises(ValueError, match="in-batch negatives need a full batch"):
        colbert.fit(["a", "b"], ["c", "d"], batch_size=4)

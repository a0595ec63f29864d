"""SPLADE: sentence-transformers `SparseEncoder` folders in both layouts it writes encode as it does,
the training loss is its `SpladeLoss`, and a trained sparse encoder saves and serves its top
entries (tests/fixtures/record_sparse_encoders.py)."""

import os
import shutil

import keras
import numpy as np
import pytest

from bertlayers.models import SparseDualEncoder
from bertlayers.tasks import TextEmbedder, TextSparseEncoder

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "sparse_encoders")


@pytest.fixture(scope="module")
def reference():
    return np.load(FIXTURES + ".npz")


@pytest.fixture(scope="module")
def splade():
    return TextSparseEncoder.from_checkpoint(os.path.join(FIXTURES, "mlm_transformer"))


def test_the_sparse_layouts_encode_as_sentence_transformers_does(reference, splade):
    """MLMTransformer + max / relu, and a fill-mask Transformer + sum / log1p_relu with prompts:
    the same nonzero entries, values within 1e-5, with a prompt, and cut to 3 entries a text."""
    texts = [str(t) for t in reference["texts"]]
    for name, encoder in (
        ("mlm_transformer", splade),
        ("fill_mask_sum", TextSparseEncoder.from_checkpoint(os.path.join(FIXTURES, "fill_mask_sum"))),
    ):
        default = encoder.encode(texts)
        np.testing.assert_array_equal(default > 0, reference[f"{name}.default"] > 0, err_msg=name)
        np.testing.assert_allclose(default, reference[f"{name}.default"], rtol=1e-5, atol=1e-5, err_msg=name)
        queries = encoder.encode(texts, prompt_name="query")
        np.testing.assert_allclose(queries, reference[f"{name}.query"], rtol=1e-5, atol=1e-5, err_msg=name)
        top3 = encoder.encode(texts, max_active_dims=3)
        np.testing.assert_allclose(top3, reference[f"{name}.top3"], rtol=1e-5, atol=1e-5, err_msg=name)
    assert splade.decode(default[0], top_k=2)[0][1] == pytest.approx(float(np.sort(default[0])[-1]))


def test_the_training_loss_is_sentence_transformers_splade_loss(reference, splade):
    """In-batch negatives on the dot product plus the weighted FLOPS of the queries and the
    documents: SpladeLoss over SparseMultipleNegativesRankingLoss on the same batch, 1e-5."""
    dual = SparseDualEncoder(splade.model.encoder, query_weight=5e-2, document_weight=3e-2)
    dual.sparse_encoder.lm_head.set_weights(splade.model.lm_head.get_weights())
    x = {}
    for prefix, key in (("query_", "loss.queries"), ("document_", "loss.documents")):
        x.update({prefix + k: np.asarray(v) for k, v in splade.inputs([str(t) for t in reference[key]]).items()})
    outputs = dual.predict_on_batch(x)
    np.testing.assert_allclose(5e-2 * outputs["query_flops"], reference["loss.query"], rtol=1e-5)
    np.testing.assert_allclose(3e-2 * outputs["document_flops"], reference["loss.document"], rtol=1e-5)
    dual.compile(keras.optimizers.Adam(1e-3))
    loss = dual.compute_loss(
        x=x, y_pred={k: keras.ops.convert_to_tensor(v) for k, v in outputs.items()}, training=False
    )
    np.testing.assert_allclose(float(keras.ops.convert_to_numpy(loss)), reference["loss.total"], rtol=1e-5)


def test_what_the_library_cannot_read_as_splade_is_refused_by_name(tmp_path, splade):
    with pytest.raises(ValueError, match="SparseEncoder folder.*encode with bertlayers.tasks.TextSparseEncoder"):
        TextEmbedder.from_checkpoint(os.path.join(FIXTURES, "mlm_transformer"))
    autoencoder = tmp_path / "csr"
    shutil.copytree(os.path.join(FIXTURES, "mlm_transformer"), autoencoder)
    modules = (autoencoder / "modules.json").read_text().replace("SpladePooling", "SparseAutoEncoder")
    (autoencoder / "modules.json").write_text(modules)
    with pytest.raises(ValueError, match=r"the modules are \['MLMTransformer', 'SparseAutoEncoder'\]"):
        TextSparseEncoder.from_checkpoint(str(autoencoder))
    with pytest.raises(ValueError, match="has no masked-LM head"):
        TextSparseEncoder.from_checkpoint(os.path.join(os.path.dirname(FIXTURES), "cross_encoders", "hf_plain"))
    with pytest.raises(ValueError, match="prompt_name 'passage' is not among the prompts"):
        splade.encode(["a"], prompt_name="passage")
    with pytest.raises(ValueError, match="in-batch negatives need a full batch"):
        splade.fit(["a", "b"], ["c", "d"], batch_size=4)


@pytest.mark.slow(reason="trains a sparse encoder, saves it and serves it as a text SavedModel")
def test_a_trained_sparse_encoder_ranks_its_documents_saves_and_serves_its_top_entries(tmp_path):
    """A few SPLADE steps raise each query's own document over the others, the regularizer keeps
    the vectors finite; saved, loaded and exported, the text model serves each text's largest
    entries (indices and values) as Keras computes them."""
    import tensorflow as tf

    encoder = TextSparseEncoder.from_checkpoint(os.path.join(FIXTURES, "mlm_transformer"))
    queries = ["where is the cat", "a quick fox", "the lazy dog", "what is on the mat"]
    documents = ["a cat sat there", "the quick brown fox", "a lazy old dog", "it is on the mat"]
    margin = lambda s: float(np.mean(np.diag(s) - (s.sum(1) - np.diag(s)) / 3))  # noqa: E731
    before = margin(encoder.similarity(encoder.encode(queries), encoder.encode(documents)))
    history = encoder.fit(queries * 4, documents * 4, epochs=3, batch_size=4, learning_rate=1e-3, verbose=0)
    after_q, after_d = encoder.encode(queries), encoder.encode(documents)
    assert np.isfinite(history.history["loss"]).all() and margin(encoder.similarity(after_q, after_d)) > before
    encoder.save(str(tmp_path / "splade.keras"))
    again = TextSparseEncoder.load(str(tmp_path / "splade.keras"))
    np.testing.assert_allclose(again.encode(queries), after_q, rtol=1e-5, atol=1e-5)
    paths = encoder.export(str(tmp_path / "savedmodels"), "splade", top_k=5)
    served = tf.saved_model.load(paths["splade_text"]).signatures["serving_default"](text=tf.constant(queries))
    expected = np.sort(after_q, axis=1)[:, ::-1][:, :5]
    np.testing.assert_allclose(served["values"].numpy(), expected, rtol=1e-5, atol=1e-5)
    picked = np.take_along_axis(after_q, served["indices"].numpy(), axis=1)
    np.testing.assert_allclose(picked, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.slow(reason="exports one endpoint of three models and serves it in a Python without Keras")
def test_one_endpoint_serves_dense_sparse_and_multi_vector_outputs_of_one_encoder_as_keras(tmp_path, splade):
    """`export_endpoint`: a dense embedder (full and truncated, prompted), the SPLADE model and a
    multi-vector model over one encoder, served from one text-in SavedModel in a Python without
    Keras, answer as the Keras models do; the encoder's weights are stored once."""
    import tensorflow as tf
    from fresh_serving import run_fresh

    from bertlayers.export import export_endpoint
    from bertlayers.models import MultiVectorEncoder, SentenceEmbedder
    from bertlayers.tasks import TextMultiVectorEncoder

    encoder = splade.model.encoder
    dense = TextEmbedder(SentenceEmbedder(encoder), sequence_length=32, prompts={"query": "query: "})
    colbert = TextMultiVectorEncoder(MultiVectorEncoder(encoder, 8), query_length=16, document_length=32)
    other = SentenceEmbedder(TextSparseEncoder.from_checkpoint(os.path.join(FIXTURES, "mlm_transformer")).model.encoder)
    with pytest.raises(ValueError, match="part 'other' holds another encoder than 'dense'"):
        export_endpoint({"dense": dense.model, "other": other}, "refused", base_dir=str(tmp_path / "refused"))
    assert not (tmp_path / "refused" / "refused").exists()

    parts = {**dense.endpoint_parts(), **splade.endpoint_parts(top_k=5), **colbert.endpoint_parts()}
    path = export_endpoint(parts, "retrieval", base_dir=str(tmp_path / "savedmodels"))["retrieval"]
    texts = np.array(["where is the cat", "a quick brown fox jumps"])
    served = lambda signature, **inputs: run_fresh(path, signature, {"text": texts, **inputs}, tmp_path, text=True)  # noqa: E731
    np.testing.assert_allclose(served("serving_default")["embedding"], dense.encode(list(texts)), atol=1e-5)
    truncated = served("dense_embed", prompt_name=np.array(b"query"), dimensions=np.array(4, "int32"))["embedding"]
    expected = dense.encode(list(texts), prompt_name="query", truncate_dim=4, normalize=True)
    np.testing.assert_allclose(truncated, expected, atol=1e-5)
    sparse, weights = served("sparse"), splade.encode(list(texts))
    np.testing.assert_allclose(sparse["values"], np.sort(weights, axis=1)[:, ::-1][:, :5], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.take_along_axis(weights, sparse["indices"], axis=1), sparse["values"], atol=1e-5)
    vectors = served("multi_vector")
    for row, document in enumerate(colbert.encode_document(list(texts), prompt="")):
        mask = vectors["token_mask"][row] != 0
        np.testing.assert_allclose(vectors["token_embeddings"][row][mask], document, atol=1e-5)
    assert served("multi_vector_query")["token_embeddings"].shape[1] <= 16

    stored = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
    sizes = stored.get_variable_to_shape_map()
    stored_size = sum(int(np.prod(shape)) for key, shape in sizes.items() if "VARIABLE_VALUE" in key)
    weights_once = {id(v): int(np.prod(v.shape)) for p in parts.values() for v in p.model.variables}
    assert stored_size == sum(weights_once.values())

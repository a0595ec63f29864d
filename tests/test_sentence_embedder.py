"""Sentence embeddings: the pooled vector by its definition, saving, and the text SavedModel
(strings in, unit vectors out, equal to the Keras model's)."""

import keras
import numpy as np
import pytest

from bertlayers.families.bert import BertEncoder
from bertlayers.models import SentenceEmbedder
from bertlayers.tokenizers import bert_uncased_vocabulary, model_tokenizer

TINY = dict(
    vocabulary_size=30522, num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64, max_sequence_length=64
)
TEXTS = ["A cat sat on the mat.", "Stock markets fell sharply on Monday, the third fall this week."]


@pytest.fixture(scope="module")
def embedder():
    return SentenceEmbedder(BertEncoder(**TINY))


def test_the_embedding_is_the_normalized_mean_of_the_real_tokens(embedder, tmp_path):
    inputs = model_tokenizer(bert_uncased_vocabulary()).packer(24)(TEXTS)
    embedding = embedder.predict_on_batch(inputs)["embedding"]
    sequence = np.asarray(embedder.encoder(inputs)["sequence_output"])
    mask = inputs["padding_mask"][..., None].astype("float32")
    mean = (sequence * mask).sum(1) / mask.sum(1)
    np.testing.assert_allclose(embedding, mean / np.linalg.norm(mean, axis=-1, keepdims=True), atol=1e-5)
    embedder.save(str(tmp_path / "embedder.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "embedder.keras"))
    assert (loaded.pooling, loaded.normalize) == ("mean", True)
    np.testing.assert_allclose(loaded.predict_on_batch(inputs)["embedding"], embedding, atol=1e-6)
    with pytest.raises(ValueError, match="SentenceEmbedder has no loss of its own"):
        embedder.compile("adam")


def test_the_text_savedmodel_serves_unit_vectors_equal_to_keras(embedder, tmp_path):
    import tensorflow as tf

    from bertlayers.export import export_for_serving

    paths = export_for_serving(
        embedder, "embedder", base_dir=str(tmp_path), vocabulary=bert_uncased_vocabulary(), sequence_length=24
    )
    served = (
        tf.saved_model.load(paths["embedder_text"])
        .signatures["serving_default"](text=tf.constant(TEXTS))["embedding"]
        .numpy()
    )
    np.testing.assert_allclose(np.linalg.norm(served, axis=-1), 1.0, atol=1e-5)
    expected = embedder.predict_on_batch(model_tokenizer(bert_uncased_vocabulary()).packer(24)(TEXTS))["embedding"]
    np.testing.assert_allclose(served, expected, atol=1e-5)

"""The dual encoder: similarity and in-batch softmax loss by their definitions, shared and two
towers, the symmetric option, training and saving."""

import keras
import numpy as np
import pytest

from bertlayers.families.bert import BertEncoder
from bertlayers.models import DualEncoder

TINY = dict(vocabulary_size=64, num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32, max_sequence_length=16)


def pairs(rows=6, seq=8, seed=0):
    rng = np.random.default_rng(seed)
    x = {}
    for prefix in ("query_", "passage_"):
        ids = rng.integers(1, 64, (rows, seq)).astype("int32")
        ids[:, rng.integers(3, seq) :] = 0
        x.update(
            {
                prefix + "token_ids": ids,
                prefix + "segment_ids": 0 * ids,
                prefix + "padding_mask": (ids != 0).astype("int32"),
            }
        )
    return x


def softmax_cross_entropy_to_diagonal(scores):
    scores = scores - scores.max(-1, keepdims=True)
    log_probabilities = scores - np.log(np.exp(scores).sum(-1, keepdims=True))
    return -np.diag(log_probabilities)


@pytest.mark.parametrize("symmetric", [False, True])
def test_similarity_and_loss_follow_their_definitions(symmetric):
    model = DualEncoder(BertEncoder(**TINY), scale=20.0, symmetric=symmetric)
    x = pairs()
    similarity = model.predict_on_batch(x)["similarity"]  # [6, 6]
    queries = model.query_embedder.predict_on_batch({k[6:]: v for k, v in x.items() if k.startswith("query_")})[
        "embedding"
    ]
    passages = model.passage_embedder.predict_on_batch({k[8:]: v for k, v in x.items() if k.startswith("passage_")})[
        "embedding"
    ]
    np.testing.assert_allclose(similarity, 20.0 * queries @ passages.T, atol=1e-4)
    expected = softmax_cross_entropy_to_diagonal(similarity)
    if symmetric:
        expected = (expected + softmax_cross_entropy_to_diagonal(similarity.T)) / 2
    model.compile(keras.optimizers.Adam(1e-3))
    loss = model.compute_loss(x=x, y_pred={"similarity": keras.ops.convert_to_tensor(similarity)}, training=False)
    np.testing.assert_allclose(float(keras.ops.convert_to_numpy(loss)), expected.mean(), rtol=1e-5)


@pytest.mark.slow(reason="trains a dual encoder until it ranks each query's passage first")
def test_in_batch_training_ranks_each_querys_passage_first(tmp_path):
    keras.utils.set_random_seed(1)
    model = DualEncoder(BertEncoder(**TINY), passage_encoder=BertEncoder(**TINY), symmetric=True)
    assert model.query_embedder.encoder is not model.passage_embedder.encoder  # two towers
    x = pairs(rows=8)
    model.compile(keras.optimizers.Adam(3e-3))
    history = model.fit(x, epochs=30, batch_size=8, verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
    similarity = model.predict_on_batch(x)["similarity"]
    assert (similarity.argmax(-1) == np.arange(8)).mean() >= 0.75
    model.save(str(tmp_path / "dual.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "dual.keras"))
    assert loaded.passage_encoder is not None and loaded.symmetric
    np.testing.assert_allclose(loaded.predict_on_batch(x)["similarity"], similarity, atol=1e-4)


def test_matryoshka_loss_is_the_weighted_sum_over_the_embeddings_leading_parts():
    """Matryoshka representation learning's loss (sentence-transformers' MatryoshkaLoss over
    MultipleNegativesRankingLoss): each leading part re-normalized, scaled, its in-batch loss
    weighted; the model saved and loaded with its dims."""
    model = DualEncoder(BertEncoder(**TINY), scale=20.0, matryoshka_dims=[16, 8, 4], matryoshka_weights=[1, 0.5, 0.25])
    x = pairs()
    outputs = model.predict_on_batch(x)
    queries = model.query_embedder.predict_on_batch({k[6:]: v for k, v in x.items() if k.startswith("query_")})
    passages = model.passage_embedder.predict_on_batch({k[8:]: v for k, v in x.items() if k.startswith("passage_")})
    q, p = queries["embedding"], passages["embedding"]
    unit = lambda v: v / np.linalg.norm(v, axis=-1, keepdims=True)  # noqa: E731
    expected = 0.0
    for i, (d, w) in enumerate([(16, 1), (8, 0.5), (4, 0.25)]):
        nested = 20.0 * unit(q[:, :d]) @ unit(p[:, :d]).T
        np.testing.assert_allclose(outputs["matryoshka_similarity"][i], nested, atol=1e-4)
        expected += w * softmax_cross_entropy_to_diagonal(nested).mean()
    model.compile(keras.optimizers.Adam(1e-3))
    y_pred = {k: keras.ops.convert_to_tensor(v) for k, v in outputs.items()}
    loss = model.compute_loss(x=x, y_pred=y_pred, training=False)
    np.testing.assert_allclose(float(keras.ops.convert_to_numpy(loss)), expected, rtol=1e-5)
    config = model.get_config()
    assert config["matryoshka_dims"] == [16, 8, 4] and config["matryoshka_weights"] == [1, 0.5, 0.25]
    with pytest.raises(ValueError, match=r"matryoshka_dims must each be in \[1, 16\].*\[32\]"):
        DualEncoder(BertEncoder(**TINY), matryoshka_dims=[32, 8])
    with pytest.raises(ValueError, match="2 matryoshka_weights for 3 matryoshka_dims"):
        DualEncoder(BertEncoder(**TINY), matryoshka_dims=[16, 8, 4], matryoshka_weights=[1, 1])

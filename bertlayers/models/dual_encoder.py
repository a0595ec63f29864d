"""A dual encoder for retrieval: queries and passages embedded apart, trained so each query's own
passage scores above the other passages of its batch (in-batch negatives).

Dimensions: B batch, H hidden.

    q = SentenceEmbedder(query tower)(query inputs)        [B, H], unit length
    p = SentenceEmbedder(passage tower)(passage inputs)    [B, H], unit length
    similarity = scale · q pᵀ                              [B, B]; row i's right column is i
    loss = CE(similarity rows, i)   (symmetric: the mean with CE(similarity columns, i))

This is sentence-transformers' MultipleNegativesRankingLoss (scale 20: a temperature of 0.05);
the symmetric form is CLIP's. With `matryoshka_dims` it is trained as Matryoshka representation
learning (Kusupati et al., 2022; sentence-transformers' MatryoshkaLoss) over that loss:

    similarity_d = scale · unit(q[:, :d]) unit(p[:, :d])ᵀ       for each d in matryoshka_dims
    loss = Σ_d w_d · loss(similarity_d)

so the first d dimensions of an embedding work on their own (`TextEmbedder.encode(truncate_dim=d)`). The towers share one encoder unless `passage_encoder` is given.
Serving embeds texts: `export_for_serving` serves a shared tower's `SentenceEmbedder`; with two
towers, export `model.query_embedder` and `model.passage_embedder` apart.
"""

from collections.abc import Sequence

import keras
from keras import ops

from bertlayers.backend import TensorLike
from bertlayers.models.encoder_model import EncoderModel
from bertlayers.models.sentence_embedder import SentenceEmbedder
from bertlayers.networks.encoder_base import INPUT_NAMES

QUERY, PASSAGE = "query_", "passage_"


@keras.saving.register_keras_serializable(package="bertlayers")
class InBatchSimilarity(keras.layers.Layer):
    """scale · q pᵀ: `[B, H]`, `[B, H]` → float32 `[B, B]`."""

    def __init__(self, scale=20.0, **kwargs):
        super().__init__(**kwargs)
        self.scale = float(scale)

    def call(self, queries, passages):
        return self.scale * ops.matmul(ops.cast(queries, "float32"), ops.transpose(ops.cast(passages, "float32")))

    def compute_output_shape(self, queries_shape, passages_shape):
        return (queries_shape[0], passages_shape[0])

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


@keras.saving.register_keras_serializable(package="bertlayers")
class NestedSimilarity(keras.layers.Layer):
    """Matryoshka: scale · cos(q[:, :d], p[:, :d]) for each d of `dims`: `[B, H]`, `[B, H]` →
    float32 `[len(dims), B, B]` (each prefix re-normalized, as cosine similarity does)."""

    def __init__(self, dims, scale=20.0, **kwargs):
        super().__init__(**kwargs)
        self.dims = [int(d) for d in dims]
        self.scale = float(scale)

    def call(self, queries, passages):
        def unit(x):
            x = ops.cast(x, "float32")
            return x / ops.maximum(ops.sqrt(ops.sum(ops.square(x), axis=-1, keepdims=True)), 1e-12)

        return ops.stack(
            [self.scale * ops.matmul(unit(queries[:, :d]), ops.transpose(unit(passages[:, :d]))) for d in self.dims]
        )

    def compute_output_shape(self, queries_shape, passages_shape):
        return (len(self.dims), queries_shape[0], passages_shape[0])

    def get_config(self):
        return {**super().get_config(), "dims": self.dims, "scale": self.scale}


@keras.saving.register_keras_serializable(package="bertlayers")
class DualEncoder(EncoderModel):
    """Inputs: the encoder's, once prefixed `query_` and once `passage_` (`query_token_ids`, ...),
    row i of each a matching pair. Output `similarity`: float32 `[B, B]`. Trained with `fit(x)`
    (no labels: row i's positive is passage i, the rest of the batch its negatives).

    Args:
      encoder: the query tower's encoder (and the passages', unless `passage_encoder`).
      passage_encoder: a second encoder for the passages (two towers).
      pooling: `SentenceEmbedder`'s pooling ("mean", "first", "max").
      scale: the similarity's scale (1 / temperature).
      symmetric: also train each passage to find its query among the batch's queries.
      matryoshka_dims: train the loss on each of these leading parts of the embedding (each at
        most the embedding's size), weighted by `matryoshka_weights` (default 1 each); output
        `matryoshka_similarity` `[len(dims), B, B]` beside `similarity`.
      matryoshka_weights: one weight per dimension of `matryoshka_dims`.
    """

    uses_pooled_output = False

    def __init__(
        self,
        encoder: keras.Model,
        passage_encoder: keras.Model | None = None,
        pooling: str = "mean",
        scale: float = 20.0,
        symmetric: bool = False,
        matryoshka_dims: Sequence[int] | None = None,
        matryoshka_weights: Sequence[float] | None = None,
        name: str = "dual_encoder",
        **kwargs,
    ) -> None:
        query_embedder = SentenceEmbedder(encoder, pooling=pooling, name="query_embedder")
        passage_embedder = (
            query_embedder
            if passage_encoder is None
            else SentenceEmbedder(passage_encoder, pooling=pooling, name="passage_embedder")
        )
        inputs = {
            prefix + n: keras.Input((None,), dtype="int32", name=prefix + n)
            for prefix in (QUERY, PASSAGE)
            for n in INPUT_NAMES
        }
        queries = query_embedder({n: inputs[QUERY + n] for n in INPUT_NAMES})["embedding"]  # [B, H]
        passages = passage_embedder({n: inputs[PASSAGE + n] for n in INPUT_NAMES})["embedding"]  # [B, H]
        dims, weights = _matryoshka(matryoshka_dims, matryoshka_weights, queries.shape[-1])
        outputs = {"similarity": InBatchSimilarity(scale, name="similarity")(queries, passages)}  # [B, B]
        if dims:
            nested = NestedSimilarity(dims, scale, name="matryoshka_similarity")
            outputs["matryoshka_similarity"] = nested(queries, passages)  # [D, B, B]
        super().__init__(inputs=inputs, outputs=outputs, name=name, **kwargs)
        self.encoder = encoder
        self.passage_encoder = passage_encoder
        self.query_embedder, self.passage_embedder = query_embedder, passage_embedder
        self.pooling, self.scale, self.symmetric = pooling, float(scale), bool(symmetric)
        self.matryoshka_dims, self.matryoshka_weights = dims, weights

    def encoders_by_input_prefix(self):
        return {QUERY: self.encoder, PASSAGE: self.passage_encoder or self.encoder}

    def unused_layers(self):  # the poolers: embeddings pool the sequence output instead
        unused = super().unused_layers()
        if self.passage_encoder is not None:
            unused += [*self.passage_encoder.layers_outside_graph(), self.passage_encoder.pooler]
        return unused

    def _constructor_args(self):
        return {
            "pooling": self.pooling,
            "scale": self.scale,
            "symmetric": self.symmetric,
            "matryoshka_dims": self.matryoshka_dims,
            "matryoshka_weights": self.matryoshka_weights,
        }

    def get_config(self):
        config = super().get_config()
        if self.passage_encoder is not None:
            config["passage_encoder"] = keras.saving.serialize_keras_object(self.passage_encoder)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if config.get("passage_encoder") is not None:
            config["passage_encoder"] = keras.saving.deserialize_keras_object(config["passage_encoder"])
        return super().from_config(config)

    def serving_model(self):
        if self.passage_encoder is not None:
            raise ValueError(
                "A DualEncoder with two encoders serves two models: export model.query_embedder "
                "and model.passage_embedder, each under its own name."
            )
        return self.query_embedder  # text in, its unit-length embedding out (queries and passages alike)

    def default_losses(self):
        return None  # compute_loss: in-batch softmax

    def default_metrics(self):
        return None

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if self.matryoshka_dims:
            nested = y_pred["matryoshka_similarity"]  # [D, B, B]
            per_row = sum(w * self._in_batch_loss(nested[i]) for i, w in enumerate(self.matryoshka_weights))
        else:
            per_row = self._in_batch_loss(y_pred["similarity"])
        return self.reduced_loss(per_row)

    def _in_batch_loss(self, similarity):
        """`[B]`: each row's softmax cross-entropy against its own column (and the mean with each
        column's against its own row, if symmetric)."""
        per_row = in_batch_cross_entropy(similarity)  # [B]
        if self.symmetric:
            per_row = (per_row + in_batch_cross_entropy(ops.transpose(similarity))) / 2
        return per_row


def in_batch_cross_entropy(similarity: TensorLike) -> TensorLike:
    """`[B]`: each row of `similarity` `[B, B]` (queries against the batch's documents) as logits,
    its softmax cross-entropy against its own column (in-batch negatives: row i's positive is
    document i, the batch's others its negatives)."""
    targets = ops.arange(ops.shape(similarity)[0], dtype="int32")
    return keras.losses.sparse_categorical_crossentropy(targets, similarity, from_logits=True)


def _matryoshka(dims, weights, size):
    """`(dims, weights)` checked against the embedding's `size`: ([], []) without dims."""
    if not dims:
        if weights:
            raise ValueError("matryoshka_weights were given without matryoshka_dims.")
        return [], []
    dims = [int(d) for d in dims]
    bad = [d for d in dims if not 0 < d <= size]
    if bad:
        raise ValueError(f"matryoshka_dims must each be in [1, {size}] (the embedding's size), got {bad}.")
    weights = [1.0] * len(dims) if weights is None else [float(w) for w in weights]
    if len(weights) != len(dims):
        raise ValueError(f"{len(weights)} matryoshka_weights for {len(dims)} matryoshka_dims: give one weight each.")
    return dims, weights

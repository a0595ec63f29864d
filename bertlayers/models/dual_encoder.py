"""A dual encoder for retrieval: queries and passages embedded apart, trained so each query's own
passage scores above the other passages of its batch (in-batch negatives).

Dimensions: B batch, H hidden.

    q = SentenceEmbedder(query tower)(query inputs)        [B, H], unit length
    p = SentenceEmbedder(passage tower)(passage inputs)    [B, H], unit length
    similarity = scale · q pᵀ                              [B, B]; row i's right column is i
    loss = CE(similarity rows, i)   (symmetric: the mean with CE(similarity columns, i))

This is sentence-transformers' MultipleNegativesRankingLoss (scale 20: a temperature of 0.05);
the symmetric form is CLIP's. The towers share one encoder unless `passage_encoder` is given.
Serving embeds texts: `export_for_serving` serves a shared tower's `SentenceEmbedder`; with two
towers, export `model.query_embedder` and `model.passage_embedder` apart.
"""

import keras
from keras import ops

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
    """

    uses_pooled_output = False

    def __init__(
        self,
        encoder: keras.Model,
        passage_encoder: keras.Model | None = None,
        pooling: str = "mean",
        scale: float = 20.0,
        symmetric: bool = False,
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
        similarity = InBatchSimilarity(scale, name="similarity")(queries, passages)  # [B, B]
        super().__init__(inputs=inputs, outputs={"similarity": similarity}, name=name, **kwargs)
        self.encoder = encoder
        self.passage_encoder = passage_encoder
        self.query_embedder, self.passage_embedder = query_embedder, passage_embedder
        self.pooling, self.scale, self.symmetric = pooling, float(scale), bool(symmetric)

    def encoders_by_input_prefix(self):
        return {QUERY: self.encoder, PASSAGE: self.passage_encoder or self.encoder}

    def unused_layers(self):  # the poolers: embeddings pool the sequence output instead
        unused = super().unused_layers()
        if self.passage_encoder is not None:
            unused += [*self.passage_encoder.layers_outside_graph(), self.passage_encoder.pooler]
        return unused

    def _constructor_args(self):
        return {"pooling": self.pooling, "scale": self.scale, "symmetric": self.symmetric}

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
        similarity = y_pred["similarity"]  # [B, B]
        targets = ops.arange(ops.shape(similarity)[0], dtype="int32")  # row i's positive: column i
        per_row = keras.losses.sparse_categorical_crossentropy(targets, similarity, from_logits=True)  # [B]
        if self.symmetric:
            per_column = keras.losses.sparse_categorical_crossentropy(
                targets, ops.transpose(similarity), from_logits=True
            )
            per_row = (per_row + per_column) / 2
        return self.reduced_loss(per_row)

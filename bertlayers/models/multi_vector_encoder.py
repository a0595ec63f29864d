"""Multi-vector (late-interaction) embeddings: an encoder's every token projected to a small
vector of unit length, scored by MaxSim (ColBERT; `bertlayers.layers.late_interaction`).

    vectors = unit_length(Dense(encoder(text)))     [B, S, D]
    mask    = the tokens scored                       [B, S]

A ColBERT model is two of these over one encoder and one projection: the documents' (punctuation
skipped) and the queries' (expanded to a fixed length with [MASK] tokens): `for_queries`. It trains
as a `MultiVectorDualEncoder` (in-batch negatives on MaxSim).
"""

import keras
from keras import ops

from bertlayers.layers.late_interaction import MaxSimScores, QueryExpansion, ScoredTokens
from bertlayers.layers.sequence_pooling import UnitLength
from bertlayers.models.dual_encoder import in_batch_cross_entropy
from bertlayers.models.encoder_model import DOCUMENT, QUERY, EncoderModel, encoder_inputs
from bertlayers.networks.encoder_base import INPUT_NAMES


@keras.saving.register_keras_serializable(package="bertlayers")
class MultiVectorEncoder(EncoderModel):
    """`token_embeddings` `[batch, seq, dimension]` and `token_mask` `[batch, seq]` (1 at the
    tokens MaxSim scores; the other rows are zeros), as sentence-transformers' `MultiVectorEncoder`
    computes them (`Transformer`, a token-level `Dense`, `MultiVectorMask`, `Normalize`).

    Inputs: the encoder's. With `expansion`, the outputs are `expansion["length"]` long.

    Args:
      encoder: a pretrained encoder.
      dimension: the vectors' width (ColBERT: 128).
      activation, use_bias: the projection's (ColBERT's: linear, no bias).
      normalize: unit length per token.
      expansion: {"token_id", "length", "attend"}: queries padded to `length` with `token_id`
        ([MASK]), every position scored (`QueryExpansion`); None: the real tokens are scored.
      skiplist_ids: token ids never scored (ColBERT's documents: punctuation).
      projection: the `Dense` layer to project with (another `MultiVectorEncoder`'s, to share it:
        `for_queries`); None builds one.
    """

    uses_pooled_output = False

    def __init__(
        self,
        encoder: keras.Model,
        dimension: int,
        activation: str = "linear",
        use_bias: bool = False,
        normalize: bool = True,
        expansion: dict | None = None,
        skiplist_ids: tuple | list = (),
        projection: keras.layers.Dense | None = None,
        name: str = "multi_vector_encoder",
        **kwargs,
    ) -> None:
        inputs = encoder_inputs()
        if expansion is None:
            token_ids, rows = inputs["token_ids"], inputs["padding_mask"]
            x = encoder(inputs)["sequence_output"]  # [B, S, H]
        else:
            expansion = {"token_id": int(expansion["token_id"]), "length": int(expansion["length"]),
                         "attend": bool(expansion.get("attend", False))}  # fmt: skip
            expanded = QueryExpansion(**expansion, name="query_expansion")(
                inputs["token_ids"], inputs["segment_ids"], inputs["padding_mask"]
            )
            token_ids, rows = expanded["token_ids"], expanded["padding_mask"]
            # The expansion rows read the query; the query reads them only where they are attended.
            x, _, _ = encoder.sequence_over(
                token_ids, expanded["segment_ids"], {"padding_mask": rows, "attention_mask": expanded["attention_mask"]}
            )  # [B, length, H]
        if projection is None:
            projection = keras.layers.Dense(
                int(dimension),
                activation=activation,
                use_bias=bool(use_bias),
                dtype=encoder.layer_dtype_policy,
                name="projection",
            )
        vectors = projection(x)  # [B, S, D]
        if normalize:
            vectors = UnitLength(name="normalize")(vectors)
        token_mask = ScoredTokens(skiplist_ids, name="scored_tokens")(token_ids, rows)  # [B, S]
        vectors = vectors * ops.expand_dims(ops.cast(token_mask, vectors.dtype), -1)
        super().__init__(
            inputs=inputs, outputs={"token_embeddings": vectors, "token_mask": token_mask}, name=name, **kwargs
        )
        self.encoder = encoder
        self.projection = projection
        self.dimension, self.activation = int(projection.units), keras.activations.serialize(projection.activation)
        self.use_bias, self.normalize = bool(projection.use_bias), bool(normalize)
        self.expansion, self.skiplist_ids = expansion, tuple(sorted({int(i) for i in skiplist_ids}))

    def _constructor_args(self):
        return {
            "dimension": self.dimension,
            "activation": self.activation,
            "use_bias": self.use_bias,
            "normalize": self.normalize,
            "expansion": self.expansion,
            "skiplist_ids": list(self.skiplist_ids),
        }

    def for_queries(self, expansion: dict | None = None, skiplist_ids: tuple | list = ()) -> "MultiVectorEncoder":
        """The same encoder and projection (shared: training one trains both) scoring queries:
        expanded as `expansion` says, skipping `skiplist_ids`."""
        return MultiVectorEncoder(
            self.encoder,
            self.dimension,
            normalize=self.normalize,
            expansion=expansion,
            skiplist_ids=skiplist_ids,
            projection=self.projection,
            name=f"{self.name}_queries",
        )

    def default_losses(self):
        raise ValueError("A MultiVectorEncoder has no loss of its own.")


@keras.saving.register_keras_serializable(package="bertlayers")
class MultiVectorDualEncoder(EncoderModel):
    """ColBERT's training: queries and documents through one encoder and projection (the queries
    expanded, each side skipping its skiplist), each query's own document ranked above the batch's
    others by MaxSim (sentence-transformers' `MultiVectorMultipleNegativesRankingLoss`).

        loss = CE(scale · MaxSim(q, d) rows, i)

    Inputs: the encoder's, once prefixed `query_` and once `document_`, row i of each a matching
    pair. Output `similarity` `[B, B]`. Trained with `fit(x)` (no labels).

    Args:
      encoder: the shared encoder.
      dimension, activation, use_bias, normalize: the projection's (`MultiVectorEncoder`).
      expansion: the queries' (`MultiVectorEncoder`), or None.
      query_skiplist_ids, document_skiplist_ids: the token ids each side leaves unscored.
      scale: the scores' multiplier (1: MaxSim itself).
      mean: MaxSim divided by the query's scored tokens.
      projection: a `MultiVectorEncoder`'s projection to share (its weights train here); None builds one.
    """

    uses_pooled_output = False

    def __init__(
        self,
        encoder: keras.Model,
        dimension: int,
        activation: str = "linear",
        use_bias: bool = False,
        normalize: bool = True,
        expansion: dict | None = None,
        query_skiplist_ids: tuple | list = (),
        document_skiplist_ids: tuple | list = (),
        scale: float = 1.0,
        mean: bool = False,
        projection: keras.layers.Dense | None = None,
        name: str = "multi_vector_dual_encoder",
        **kwargs,
    ) -> None:
        documents = MultiVectorEncoder(
            encoder,
            dimension,
            activation,
            use_bias,
            normalize,
            skiplist_ids=document_skiplist_ids,
            projection=projection,
        )
        queries = documents.for_queries(expansion, query_skiplist_ids)
        inputs = {
            prefix + n: keras.Input((None,), dtype="int32", name=prefix + n)
            for prefix in (QUERY, DOCUMENT)
            for n in INPUT_NAMES
        }
        q = queries({n: inputs[QUERY + n] for n in INPUT_NAMES})
        d = documents({n: inputs[DOCUMENT + n] for n in INPUT_NAMES})
        scores = MaxSimScores(scale, mean, name="similarity")(
            q["token_embeddings"], q["token_mask"], d["token_embeddings"], d["token_mask"]
        )  # [B, B]
        super().__init__(inputs=inputs, outputs={"similarity": scores}, name=name, **kwargs)
        self.encoder = encoder
        self.documents, self.queries = documents, queries
        self.scale, self.mean = float(scale), bool(mean)

    def _constructor_args(self):
        documents = self.documents._constructor_args()
        return {
            **{key: documents[key] for key in ("dimension", "activation", "use_bias", "normalize")},
            "expansion": self.queries.expansion,
            "query_skiplist_ids": list(self.queries.skiplist_ids),
            "document_skiplist_ids": list(self.documents.skiplist_ids),
            "scale": self.scale,
            "mean": self.mean,
        }

    def encoders_by_input_prefix(self):
        return {QUERY: self.encoder, DOCUMENT: self.encoder}

    def serving_model(self):
        return self.documents  # text in, its token vectors out

    def default_losses(self):
        return None  # compute_loss

    def default_metrics(self):
        return None

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        similarity = y_pred["similarity"]  # [B, B]
        return self.reduced_loss(in_batch_cross_entropy(similarity))

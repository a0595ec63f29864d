"""Sparse lexical embeddings (SPLADE): an encoder's masked-LM head read at every token and pooled
into one weight per vocabulary entry, most of them zero, for inverted-index retrieval.

Dimensions: B batch, S sequence, V vocabulary.

    logits  = MaskedLMHead(encoder(text))                 [B, S, V], the head tied to the embedding
    weights = max_t log(1 + ReLU(logits[:, t]))           [B, V], over the real tokens
    score(q, d) = weights(q) · weights(d)

Trained as a dual encoder (`SparseDualEncoder`): in-batch negatives on the dot product (scale 1,
sentence-transformers' `SparseMultipleNegativesRankingLoss`) plus the FLOPS regularizer of the
queries' and documents' weights, which pushes the vectors to few nonzero entries
(`SpladeLoss`). Served, the text model returns each text's `top_k` entries (`indices`, `values`).
"""

import keras
from keras import ops

from bertlayers.layers.splade_pooling import SpladePooling, flops_regularizer
from bertlayers.models.dual_encoder import in_batch_cross_entropy
from bertlayers.models.encoder_model import DOCUMENT, QUERY, EncoderModel, encoder_inputs
from bertlayers.models.pretrainer import masked_lm_head
from bertlayers.networks.encoder_base import INPUT_NAMES


@keras.saving.register_keras_serializable(package="bertlayers")
class SparseEncoder(EncoderModel):
    """`sparse_embedding` `[batch, vocabulary]`: SPLADE's pooling of the masked-LM logits at every
    token (`SpladePooling`).

    Inputs: the encoder's. Output `sparse_embedding`: float32 `[batch, V]`, nonnegative.

    Args:
      encoder: a pretrained encoder; its masked-LM head (tied to its token embedding) is built
        here: load a checkpoint's head weights with `lm_head.set_weights` (`TextSparseEncoder`
        does), or train it.
      pooling: "max" (SPLADE v2 and later) or "sum" over the tokens.
      activation: "relu" or "log1p_relu" (`SpladePooling`).
    """

    uses_pooled_output = False

    def __init__(
        self,
        encoder: keras.Model,
        pooling: str = "max",
        activation: str = "relu",
        name: str = "sparse_encoder",
        **kwargs,
    ) -> None:
        inputs = encoder_inputs()
        lm_head = masked_lm_head(encoder)
        splade = SpladePooling(pooling, activation, name="splade_pooling")
        logits = lm_head(encoder(inputs)["sequence_output"])  # [B, S, V]
        weights = splade(logits, inputs["padding_mask"])  # [B, V]
        super().__init__(inputs=inputs, outputs={"sparse_embedding": weights}, name=name, **kwargs)
        self.encoder = encoder
        self.lm_head = lm_head
        self.pooling, self.activation = splade.pooling, splade.activation

    def _constructor_args(self):
        return {"pooling": self.pooling, "activation": self.activation}

    def default_losses(self):
        raise ValueError("A SparseEncoder has no loss of its own: train it in a SparseDualEncoder.")


@keras.saving.register_keras_serializable(package="bertlayers")
class SparseDualEncoder(EncoderModel):
    """SPLADE training: queries and documents through one `SparseEncoder`, each query's own
    document ranked above the batch's others by the dot product of their sparse vectors, and both
    kept sparse by the FLOPS regularizer.

        loss = CE(scale · q dᵀ rows, i) + query_weight · FLOPS(q) + document_weight · FLOPS(d)

    Inputs: the encoder's, once prefixed `query_` and once `document_`, row i of each a matching
    pair. Outputs `similarity` `[B, B]`, `query_flops` and `document_flops` (scalars). Trained with
    `fit(x)` (no labels).

    Args:
      encoder: the shared encoder.
      pooling, activation: the `SparseEncoder`'s.
      scale: the similarity's scale (1: the dot product itself, sentence-transformers' default).
      query_weight, document_weight: the regularizers' weights (SPLADE v2 ramps them up over
        training; sentence-transformers' examples keep 5e-5 and 3e-5).
    """

    uses_pooled_output = False

    def __init__(
        self,
        encoder: keras.Model,
        pooling: str = "max",
        activation: str = "relu",
        scale: float = 1.0,
        query_weight: float = 5e-5,
        document_weight: float = 3e-5,
        name: str = "sparse_dual_encoder",
        **kwargs,
    ) -> None:
        sparse = SparseEncoder(encoder, pooling=pooling, activation=activation)
        inputs = {
            prefix + n: keras.Input((None,), dtype="int32", name=prefix + n)
            for prefix in (QUERY, DOCUMENT)
            for n in INPUT_NAMES
        }
        queries = sparse({n: inputs[QUERY + n] for n in INPUT_NAMES})["sparse_embedding"]  # [B, V]
        documents = sparse({n: inputs[DOCUMENT + n] for n in INPUT_NAMES})["sparse_embedding"]  # [B, V]
        scores = SparseScores(scale, name="similarity")(queries, documents)
        super().__init__(inputs=inputs, outputs=scores, name=name, **kwargs)
        self.encoder = encoder
        self.sparse_encoder = sparse
        self.pooling, self.activation = pooling, activation
        self.scale, self.query_weight, self.document_weight = float(scale), float(query_weight), float(document_weight)

    def _constructor_args(self):
        return {
            "pooling": self.pooling,
            "activation": self.activation,
            "scale": self.scale,
            "query_weight": self.query_weight,
            "document_weight": self.document_weight,
        }

    def encoders_by_input_prefix(self):
        return {QUERY: self.encoder, DOCUMENT: self.encoder}

    def serving_model(self):
        return self.sparse_encoder  # text in, its sparse vector out (queries and documents alike)

    def default_losses(self):
        return None  # compute_loss

    def default_metrics(self):
        return None

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        similarity = y_pred["similarity"]  # [B, B]
        ranking = in_batch_cross_entropy(similarity)  # [B]
        regularizer = self.query_weight * y_pred["query_flops"] + self.document_weight * y_pred["document_flops"]
        return self.reduced_loss(ranking) + regularizer


@keras.saving.register_keras_serializable(package="bertlayers")
class SparseScores(keras.layers.Layer):
    """scale · q dᵀ `[B, B]`, and the FLOPS regularizer of the queries and of the documents."""

    def __init__(self, scale=1.0, **kwargs):
        super().__init__(**kwargs)
        self.scale = float(scale)

    def call(self, queries, documents):
        queries, documents = ops.cast(queries, "float32"), ops.cast(documents, "float32")
        return {
            "similarity": self.scale * ops.matmul(queries, ops.transpose(documents)),
            "query_flops": flops_regularizer(queries),
            "document_flops": flops_regularizer(documents),
        }

    def compute_output_shape(self, queries_shape, documents_shape):
        return {"similarity": (queries_shape[0], documents_shape[0]), "query_flops": (), "document_flops": ()}

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}

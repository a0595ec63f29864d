"""Late interaction (ColBERT; Khattab and Zaharia, 2020): a text kept as one small vector a token,
a query scored against a document by MaxSim.

Dimensions: B batch, S sequence, D the vectors' width; Q and T a query's and a document's tokens.

    score(q, d) = sum over q's scored tokens i of max over d's scored tokens j of q_i · d_j

ColBERT's query augmentation pads every query to a fixed length with [MASK] tokens, which the
encoder computes (attending to the query's real tokens, not attended by them) and MaxSim scores: a
learned query expansion (`QueryExpansion`). Documents leave punctuation out of the score
(`ScoredTokens`' skiplist).
"""

import keras
import numpy as np
from keras import ops


@keras.saving.register_keras_serializable(package="bertlayers")
class QueryExpansion(keras.layers.Layer):
    """A query's inputs padded to `length` tokens, the padding turned into `token_id` ([MASK]).

    As sentence-transformers' `query_expansion` {"strategy": "fixed"} and ColBERT do: every position
    is computed and scored; with `attend` False (ColBERT's default) no token attends to the
    expansion tokens, which only read the query; with `attend` True they are ordinary tokens.

    Args:
      token_id: the expansion token's id.
      length: the queries' length in tokens (longer inputs are cut to it: pack queries at
        `length`, and the packer keeps their closing token).
      attend: whether the encoder attends to the expansion tokens.

    Call args:
      token_ids, segment_ids, padding_mask: int `[B, S]`, S at most `length`, real tokens first.

    Returns:
      {"token_ids", "segment_ids", "padding_mask" (1 at every position: the rows computed and
      scored), "attention_mask" (bool `[B, 1, length]`, the keys attended)}, each `[B, length]`
      unless said.
    """

    def __init__(self, token_id: int, length: int, attend: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        if int(length) < 1:
            raise ValueError(f"QueryExpansion length must be positive, got {length}.")
        self.token_id, self.length, self.attend = int(token_id), int(length), bool(attend)

    def build(self, token_ids_shape, segment_ids_shape=None, padding_mask_shape=None):
        self.built = True

    def _padded(self, x):
        # Concatenated then cut: S is dynamic in a served graph (a batch's longest request).
        filler = ops.zeros((ops.shape(x)[0], self.length), dtype=x.dtype)
        return ops.concatenate([x, filler], axis=1)[:, : self.length]

    def call(self, token_ids, segment_ids, padding_mask):
        real = ops.not_equal(self._padded(padding_mask), 0)  # [B, length]
        ones = ops.ones_like(real, dtype="int32")
        token_ids = ops.where(real, self._padded(token_ids), self.token_id)
        return {
            "token_ids": ops.cast(token_ids, "int32"),
            "segment_ids": ops.cast(self._padded(segment_ids), "int32"),
            "padding_mask": ones,
            "attention_mask": ops.expand_dims(ops.ones_like(real) if self.attend else real, 1),
        }

    def compute_output_spec(self, token_ids, segment_ids=None, padding_mask=None):
        batch = token_ids.shape[0]
        spec = {name: keras.KerasTensor((batch, self.length), "int32") for name in ("token_ids", "segment_ids")}
        return {  # one tensor each: the functional graph tells outputs apart by object
            **spec,
            "padding_mask": keras.KerasTensor((batch, self.length), "int32"),
            "attention_mask": keras.KerasTensor((batch, 1, self.length), "bool"),
        }

    def get_config(self):
        return {**super().get_config(), "token_id": self.token_id, "length": self.length, "attend": self.attend}


@keras.saving.register_keras_serializable(package="bertlayers")
class ScoredTokens(keras.layers.Layer):
    """The tokens MaxSim scores: the computed ones, less those whose ids are in `skiplist_ids`
    (sentence-transformers' `MultiVectorMask`: ColBERT leaves documents' punctuation out).

    Args:
      skiplist_ids: token ids never scored.

    Call args:
      token_ids: int `[B, S]`.
      padding_mask: `[B, S]`, nonzero at the tokens computed.

    Returns:
      int32 `[B, S]`: 1 at the scored tokens.
    """

    def __init__(self, skiplist_ids: tuple | list = (), **kwargs) -> None:
        super().__init__(**kwargs)
        self.skiplist_ids = tuple(sorted({int(i) for i in skiplist_ids}))

    def build(self, token_ids_shape, padding_mask_shape=None):
        self.built = True

    def call(self, token_ids, padding_mask):
        scored = ops.not_equal(padding_mask, 0)
        for token_id in self.skiplist_ids:  # a handful of ids (punctuation): one comparison each
            scored = ops.logical_and(scored, ops.not_equal(token_ids, token_id))
        return ops.cast(scored, "int32")

    def compute_output_shape(self, token_ids_shape, padding_mask_shape=None):
        return tuple(token_ids_shape)

    def compute_output_spec(self, token_ids, padding_mask=None):
        return keras.KerasTensor(token_ids.shape, "int32")

    def get_config(self):
        return {**super().get_config(), "skiplist_ids": list(self.skiplist_ids)}


@keras.saving.register_keras_serializable(package="bertlayers")
class MaxSimScores(keras.layers.Layer):
    """`scale` times the MaxSim of every query against every document of a batch, `[Bq, Bd]` float32
    (ColBERT's training scores: each query's own document against the batch's others).

    Args:
      scale: the scores' multiplier before a softmax (sentence-transformers' default 1: MaxSim is
        a sum over the query's tokens, already wide).
      mean: divide each score by its query's scored tokens ("meanmaxsim").

    Call args:
      queries: `[Bq, Q, D]` token vectors; query_mask: `[Bq, Q]`, nonzero at the scored ones.
      documents: `[Bd, T, D]`; document_mask: `[Bd, T]`.
    """

    def __init__(self, scale: float = 1.0, mean: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.scale, self.mean = float(scale), bool(mean)

    def build(self, queries_shape, query_mask_shape=None, documents_shape=None, document_mask_shape=None):
        self.built = True

    def call(self, queries, query_mask, documents, document_mask):
        queries, documents = ops.cast(queries, "float32"), ops.cast(documents, "float32")
        dots = ops.einsum("aqd,btd->abqt", queries, documents)  # [Bq, Bd, Q, T]
        in_document = ops.expand_dims(ops.expand_dims(ops.not_equal(document_mask, 0), 0), 2)  # [1, Bd, 1, T]
        best = ops.max(ops.where(in_document, dots, -1e9), axis=-1)  # [Bq, Bd, Q]
        scored = ops.expand_dims(ops.cast(ops.not_equal(query_mask, 0), "float32"), 1)  # [Bq, 1, Q]
        total = ops.sum(best * scored, axis=-1)  # [Bq, Bd]
        if self.mean:
            total = total / ops.maximum(ops.sum(scored, axis=-1), 1.0)
        return self.scale * total

    def compute_output_shape(
        self, queries_shape, query_mask_shape=None, documents_shape=None, document_mask_shape=None
    ):
        return (queries_shape[0], documents_shape[0])

    def get_config(self):
        return {**super().get_config(), "scale": self.scale, "mean": self.mean}


def maxsim(queries: list, documents: list, mean: bool = False, chunk: int = 1024) -> np.ndarray:
    """MaxSim of every query against every document, each text its scored tokens' vectors
    (`[tokens, D]`, as `TextMultiVectorEncoder.encode` gives them): float32
    `[len(queries), len(documents)]`; with `mean`, each score divided by its query's tokens
    (sentence-transformers' "meanmaxsim"). The documents are padded into one array and scored
    `chunk` at a time (a query's dot products with a chunk: `[chunk, T, Q]`)."""
    scores = np.zeros((len(queries), len(documents)), "float32")
    if not len(queries) or not len(documents):
        return scores
    width = max(len(d) for d in documents)
    dimension = np.asarray(queries[0]).shape[-1]
    padded = np.zeros((len(documents), max(width, 1), dimension), "float32")  # [N, T, D]
    real = np.zeros(padded.shape[:2], bool)  # [N, T]
    for j, document in enumerate(documents):
        padded[j, : len(document)], real[j, : len(document)] = document, True
    for i, query in enumerate(queries):
        query = np.asarray(query, "float32")  # [Q, D]
        for start in range(0, len(documents), chunk):
            dots = padded[start : start + chunk] @ query.T  # [n, T, Q]
            best = np.where(real[start : start + chunk, :, None], dots, -np.inf).max(axis=1)  # [n, Q]
            best = np.where(best == -np.inf, 0.0, best)  # an empty document adds nothing
            scores[i, start : start + chunk] = best.sum(axis=1) / (max(len(query), 1) if mean else 1)
    return scores

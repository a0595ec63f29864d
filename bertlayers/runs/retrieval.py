"""Retrieval with an encoder: first-stage scores (BM25, or a dual encoder's embeddings), re-ranking
of each query's top k by a cross-encoder, and the training examples a re-ranker learns from.

Every function returns a score matrix `[queries, passages]` (higher is better), which
`bertlayers.metrics.ranking_metrics` turns into MRR@10, nDCG@10 and recall@k.
"""

import re
from collections.abc import Callable

import keras
import numpy as np

from bertlayers.metrics.ranking import ranked
from bertlayers.task_data.multiple_choice import ChoiceExample
from bertlayers.tokenizers.in_graph_tokenizer import pack_in_chunks

__all__ = [
    "bm25_scores",
    "embed",
    "embedding_scores",
    "rerank",
    "reranker_examples",
]

_WORD = re.compile(r"\w+")


def bm25_scores(queries: list[str], passages: list[str], k1: float = 1.5, b: float = 0.75) -> np.ndarray:
    """Okapi BM25 (`rank_bm25.BM25Okapi`) over lower-cased word tokens: float `[queries, passages]`."""
    try:
        from rank_bm25 import BM25Okapi
    except ImportError:
        raise ImportError("The BM25 baseline needs rank-bm25: pip install rank-bm25==0.2.2") from None
    index = BM25Okapi([_WORD.findall(p.lower()) for p in passages], k1=k1, b=b)
    return np.stack([index.get_scores(_WORD.findall(q.lower())) for q in queries])


def embed(
    embedder: keras.Model, packer: Callable, texts: list[str], batch_size: int = 64, verbose: str | int = 0
) -> np.ndarray:
    """A `SentenceEmbedder`'s embeddings of `texts`: float `[len(texts), hidden]`."""
    from bertlayers.training.length_batching import predict_by_length

    return predict_by_length(embedder, pack_in_chunks(packer, texts), batch_size=batch_size, verbose=verbose)[
        "embedding"
    ]


def embedding_scores(
    query_embedder: keras.Model,
    passage_embedder: keras.Model,
    query_packer: Callable,
    passage_packer: Callable,
    queries: list[str],
    passages: list[str],
    batch_size: int = 64,
    verbose: str | int = 0,
    truncate_dim: int | None = None,
) -> np.ndarray:
    """Dot products of the queries' and passages' embeddings (cosines, as a `SentenceEmbedder`
    normalizes): float `[queries, passages]`. `truncate_dim`: the cosines of their first that many
    dimensions (a Matryoshka-trained model's smaller embeddings)."""
    q = embed(query_embedder, query_packer, queries, batch_size, verbose)  # [Q, H]
    p = embed(passage_embedder, passage_packer, passages, batch_size, verbose)  # [P, H]
    if truncate_dim is not None:
        unit = lambda x: x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)  # noqa: E731
        q, p = unit(q[:, :truncate_dim]), unit(p[:, :truncate_dim])
    return q @ p.T


def rerank(
    scores: np.ndarray,
    scorer: keras.Model,
    pair_packer: Callable,
    queries: list[str],
    passages: list[str],
    top_k: int = 10,
    batch_size: int = 64,
    verbose: str | int = 0,
) -> np.ndarray:
    """Re-rank each query's `top_k` first-stage passages by a cross-encoder.

    Args:
      scores: first-stage scores `[queries, passages]`.
      scorer: a model scoring packed (query, passage) pairs with one logit (`MultipleChoice.scorer`,
        a one-output `SequenceClassifier`).
      pair_packer: packs (queries, passages) as sentence pairs.

    Returns:
      Scores `[queries, passages]` ranking the top k by the cross-encoder and, below them, the rest
      in their first-stage order.
    """
    from bertlayers.training.length_batching import predict_by_length

    scores = np.asarray(scores)
    top = ranked(scores, top_k)  # [Q, k]
    first = [queries[q] for q in range(len(top)) for _ in top[q]]
    second = [passages[d] for row in top for d in row]
    cross = predict_by_length(
        scorer, pack_in_chunks(pair_packer, first, second), batch_size=batch_size, verbose=verbose
    )["logits"][:, 0].reshape(top.shape)
    # Below every re-ranked passage, the rest keep their first-stage order.
    rest = ranked(scores, scores.shape[1])[:, top.shape[1] :]  # [Q, P - k]
    result = np.empty(scores.shape, "float64")
    rows = np.arange(len(top))[:, None]
    result[rows, top] = cross
    result[rows, rest] = cross.min() - 1.0 - np.arange(rest.shape[1])
    return result


def reranker_examples(pairs: list, first_stage_scores: np.ndarray, negatives: int = 3, seed: int | None = 0) -> list:
    """Training examples for a listwise cross-encoder (`MultipleChoice` over a query's passages):
    each query's own passage among `negatives` hard negatives, the highest-scored other passages
    of the first stage, in a random order. `first_stage_scores` `[pairs, passages]` ranks the
    pairs' distinct passages (in `retrieval_set(pairs)`'s order)."""
    from bertlayers.task_data.retrieval import retrieval_set

    collection = retrieval_set(pairs)
    if len(collection.passages) <= negatives:
        raise ValueError(
            f"{negatives} negatives a query need more than {negatives} distinct passages; "
            f"the pairs have {len(collection.passages)}."
        )
    rng = np.random.default_rng(seed)
    top = ranked(first_stage_scores, negatives + 1)  # the own passage can be among them
    examples = []
    for query, relevant, row in zip(collection.queries, collection.relevant, top):
        hard = [collection.passages[d] for d in row if d not in relevant][:negatives]
        label = int(rng.integers(negatives + 1))
        own = collection.passages[next(iter(relevant))]
        examples.append(ChoiceExample(query, tuple(hard[:label] + [own] + hard[label:]), label))
    return examples


def hybrid_scores(first: np.ndarray, second: np.ndarray, weight: float = 0.5) -> np.ndarray:
    """Two systems' scores `[queries, passages]` fused: each query's scores of each system scaled
    to [0, 1] (min-max; a query whose scores are all equal gets 0), then `weight` · first +
    (1 - weight) · second (the convex combination of lexical and dense scores that hybrid
    retrieval studies use)."""

    def scaled(scores):
        scores = np.asarray(scores, "float64")
        low, high = scores.min(axis=1, keepdims=True), scores.max(axis=1, keepdims=True)
        return np.where(high > low, (scores - low) / np.where(high > low, high - low, 1.0), 0.0)

    if not 0 <= weight <= 1:
        raise ValueError(f"weight must be in [0, 1], got {weight}.")
    return weight * scaled(first) + (1 - weight) * scaled(second)

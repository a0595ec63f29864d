"""Ranking metrics of retrieval and re-ranking (MS MARCO's and BEIR's definitions): MRR@k, nDCG@k
and recall@k, from a score matrix and each query's relevant documents.

Documents are ranked by score, highest first; equal scores keep the documents' order (the lower
index ranks first), so a result never depends on how a sort breaks ties. Relevance is binary.
A query with no relevant document is left out of every mean, as the official evaluators leave out
queries missing from the relevance judgements.
"""

import numpy as np


def ranked(scores, k):
    """The indices of each query's top `k` documents, best first: int `[queries, min(k, docs)]`."""
    scores = np.asarray(scores, dtype="float64")
    if scores.ndim != 2:
        raise ValueError(f"scores must be [queries, documents], got shape {scores.shape}.")
    # Stable on the negated scores: ties keep the lower document index first.
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def _relevant_sets(relevant, num_queries):
    sets = [set(int(d) for d in docs) for docs in relevant]
    if len(sets) != num_queries:
        raise ValueError(
            f"relevant has {len(sets)} entries for {num_queries} queries (one set of documents per query)."
        )
    return sets


def mrr_at_k(scores, relevant, k=10):
    """Mean over queries of 1 / (rank of the first relevant document), 0 when none is in the top k."""
    top = ranked(scores, k)
    sets = _relevant_sets(relevant, len(top))
    reciprocal = [
        next((1.0 / (rank + 1) for rank, doc in enumerate(row) if doc in docs), 0.0)
        for row, docs in zip(top, sets)
        if docs
    ]
    return float(np.mean(reciprocal)) if reciprocal else 0.0


def ndcg_at_k(scores, relevant, k=10):
    """Mean over queries of DCG@k / ideal DCG@k, DCG = Σ_rank rel / log2(rank + 1), ranks from 1
    (pytrec_eval's `ndcg_cut`, which BEIR reports)."""
    top = ranked(scores, k)
    sets = _relevant_sets(relevant, len(top))
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    values = []
    for row, docs in zip(top, sets):
        if docs:
            ideal = discounts[: min(len(docs), k)].sum()
            values.append(sum(discounts[rank] for rank, doc in enumerate(row) if doc in docs) / ideal)
    return float(np.mean(values)) if values else 0.0


def recall_at_k(scores, relevant, k=10):
    """Mean over queries of |relevant ∩ top k| / |relevant|."""
    top = ranked(scores, k)
    sets = _relevant_sets(relevant, len(top))
    values = [len(docs & set(row.tolist())) / len(docs) for row, docs in zip(top, sets) if docs]
    return float(np.mean(values)) if values else 0.0


def ranking_metrics(scores, relevant, ks=(1, 10)):
    """{"mrr@10", "ndcg@10", "recall@k" for each k in `ks`}: scores `[queries, documents]`,
    `relevant` one iterable of document indices per query."""
    result = {"mrr@10": mrr_at_k(scores, relevant, 10), "ndcg@10": ndcg_at_k(scores, relevant, 10)}
    result.update({f"recall@{k}": recall_at_k(scores, relevant, k) for k in ks})
    return result

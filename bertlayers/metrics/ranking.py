"""Ranking metrics of retrieval and re-ranking (MS MARCO's and BEIR's definitions): MRR@k, nDCG@k
and recall@k, from a score matrix and each query's relevant documents.

Documents are ranked by score, highest first; equal scores keep the documents' order (the lower
index ranks first), so a result never depends on how a sort breaks ties (trec_eval orders ties by
document id, descending: the figures equal its own where no two scores tie). Relevance is a set
of document indices a query (binary), or {document index: grade} (graded, as BEIR's qrels): nDCG
gains the grade (pytrec_eval's `ndcg_cut`, which BEIR reports), MRR and recall count any document
of grade 1 or more. A query with no relevant document is left out of every mean, as the official
evaluators leave out queries missing from the relevance judgements.
"""

import numpy as np


def ranked(scores, k):
    """The indices of each query's top `k` documents, best first: int `[queries, min(k, docs)]`."""
    scores = np.asarray(scores, dtype="float64")
    if scores.ndim != 2:
        raise ValueError(f"scores must be [queries, documents], got shape {scores.shape}.")
    # Stable on the negated scores: ties keep the lower document index first.
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def _grades(relevant, num_queries):
    """{document: grade} a query, grade-0 entries left out (a set of documents: grade 1 each)."""
    grades = [
        {int(d): int(g) for d, g in docs.items() if g > 0} if isinstance(docs, dict) else {int(d): 1 for d in docs}
        for docs in relevant
    ]
    if len(grades) != num_queries:
        raise ValueError(
            f"relevant has {len(grades)} entries for {num_queries} queries (one set of documents per query)."
        )
    return grades


def _relevant_sets(relevant, num_queries):
    return [set(grades) for grades in _grades(relevant, num_queries)]


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
    """Mean over queries of DCG@k / ideal DCG@k, DCG = Σ_rank grade / log2(rank + 1), ranks from
    1 (pytrec_eval's `ndcg_cut`, which BEIR reports; binary relevance: grade 1)."""
    top = ranked(scores, k)
    all_grades = _grades(relevant, len(top))
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    values = []
    for row, grades in zip(top, all_grades):
        if grades:
            best = sorted(grades.values(), reverse=True)[:k]
            ideal = float(np.dot(discounts[: len(best)], best))
            values.append(sum(discounts[rank] * grades.get(int(doc), 0) for rank, doc in enumerate(row)) / ideal)
    return float(np.mean(values)) if values else 0.0


def recall_at_k(scores, relevant, k=10):
    """Mean over queries of |relevant ∩ top k| / |relevant|."""
    top = ranked(scores, k)
    sets = _relevant_sets(relevant, len(top))
    values = [len(docs & set(row.tolist())) / len(docs) for row, docs in zip(top, sets) if docs]
    return float(np.mean(values)) if values else 0.0


def ranking_metrics(scores, relevant, ks=(1, 10)):
    """{"mrr@10", "ndcg@10", "recall@k" for each k in `ks`}: scores `[queries, documents]`,
    `relevant` one iterable of document indices (or {index: grade}) per query."""
    result = {"mrr@10": mrr_at_k(scores, relevant, 10), "ndcg@10": ndcg_at_k(scores, relevant, 10)}
    result.update({f"recall@{k}": recall_at_k(scores, relevant, k) for k in ks})
    return result

"""Task metrics with their official definitions (GLUE, the SQuAD scorer, conlleval, retrieval's
MRR@10 / nDCG@10 / recall@k)."""

from bertlayers.metrics.classification import (
    accuracy,
    classification_metrics,
    f1,
    matthews_correlation,
    pearson,
    spearman,
)
from bertlayers.metrics.entities import entity_scores, entity_spans
from bertlayers.metrics.ranking import mrr_at_k, ndcg_at_k, ranking_metrics, recall_at_k
from bertlayers.metrics.squad import normalize_answer, squad_scores

__all__ = [
    "accuracy",
    "classification_metrics",
    "entity_scores",
    "entity_spans",
    "f1",
    "matthews_correlation",
    "mrr_at_k",
    "ndcg_at_k",
    "normalize_answer",
    "pearson",
    "ranking_metrics",
    "recall_at_k",
    "spearman",
    "squad_scores",
]

"""Task metrics with their official definitions (GLUE, the SQuAD scorer, conlleval)."""

from bertlayers.metrics.classification import (
    accuracy, classification_metrics, f1, matthews_correlation, pearson, spearman,
)
from bertlayers.metrics.entities import entity_scores, entity_spans
from bertlayers.metrics.squad import normalize_answer, squad_scores

__all__ = [
    "accuracy",
    "classification_metrics",
    "entity_scores",
    "entity_spans",
    "f1",
    "matthews_correlation",
    "normalize_answer",
    "pearson",
    "spearman",
    "squad_scores",
]

"""Classification and regression metrics (GLUE's): accuracy, F1, Matthews correlation,
Pearson and Spearman correlation."""

import numpy as np


def accuracy(labels, predictions):
    """The share of `predictions` equal to `labels`."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return float(np.mean(labels == predictions)) if len(labels) else 0.0


def f1_scores(labels, predictions, num_classes):
    """Per-class F1 (a class with no true and no predicted examples scores 0)."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    scores = []
    for c in range(num_classes):
        tp = np.sum((predictions == c) & (labels == c))
        fp = np.sum((predictions == c) & (labels != c))
        fn = np.sum((predictions != c) & (labels == c))
        scores.append(float(2 * tp / (2 * tp + fp + fn)) if tp else 0.0)
    return scores


def f1(labels, predictions, num_classes=2, positive=1):
    """Binary F1 of class `positive` for two classes (GLUE's MRPC/QQP F1), macro F1 otherwise."""
    scores = f1_scores(labels, predictions, num_classes)
    return scores[positive] if num_classes == 2 else float(np.mean(scores))


def classification_metrics(labels, predictions, label_names):
    """What a classification run reports: accuracy, Matthews correlation, and F1 fitted to the
    label set: for two classes the binary F1 of the second label (named in `f1_positive_label`),
    for more the macro F1; F1 per class, by label name, in both cases."""
    num_classes = len(label_names)
    per_class = f1_scores(labels, predictions, num_classes)
    metrics = {
        "accuracy": accuracy(labels, predictions),
        "matthews_correlation": matthews_correlation(labels, predictions, num_classes),
    }
    if num_classes == 2:
        metrics.update({"f1": per_class[1], "f1_positive_label": label_names[1]})
    else:
        metrics["macro_f1"] = float(np.mean(per_class))
    metrics["per_class_f1"] = dict(zip(label_names, per_class))
    return metrics


def matthews_correlation(labels, predictions, num_classes=2):
    """Matthews correlation coefficient (multi-class form of Gorodkin 2004); 0 when undefined."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    confusion = np.zeros((num_classes, num_classes))
    np.add.at(confusion, (labels, predictions), 1)
    t, p = confusion.sum(1), confusion.sum(0)
    c, s = np.trace(confusion), confusion.sum()
    denominator = np.sqrt(s**2 - np.dot(p, p)) * np.sqrt(s**2 - np.dot(t, t))
    return float((c * s - np.dot(t, p)) / denominator) if denominator else 0.0


def pearson(x, y):
    """Pearson's correlation of `x` and `y` (0 when either is constant)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt(np.dot(x, x) * np.dot(y, y))
    return float(np.dot(x, y) / denominator) if denominator else 0.0


def _ranks(values):
    """Ranks from 1, ties sharing their average rank."""
    values = np.asarray(values, float)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(x, y):
    """Spearman's rank correlation: Pearson's on (tie-averaged) ranks."""
    return pearson(_ranks(x), _ranks(y))

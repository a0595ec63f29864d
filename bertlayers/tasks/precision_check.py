"""How far a served precision moves a task's answers: the same fine-tuned model in float32 and in
the precision it would be exported in (`bertlayers.export`: bfloat16, int8 weights), scored on
the same labelled texts."""

from collections.abc import Sequence

from bertlayers.export.precision import in_precision
from bertlayers.metrics.entities import entity_scores
from bertlayers.tasks.text_classifier import TextClassifier
from bertlayers.tasks.text_tagger import TextTagger

__all__ = ["precision_check"]


def precision_check(
    task: TextClassifier | TextTagger, texts: Sequence, labels: Sequence, precision: str = "int8"
) -> dict:
    """Score `task` (a `TextClassifier`: accuracy; a `TextTagger`: entity F1, both in points) on
    `texts` and their gold `labels` (tag lists for a tagger) in float32 and in `precision`, as
    `export_for_serving(..., precision=precision)` would serve it.

    Returns {"examples", "metric", "float32", precision, "change" (points, precision minus
    float32), "same_answers" (the share of texts answered alike: a label, or every word's tag)}.
    """
    other = type(task)(in_precision(task.model, precision), task.sequence_length)
    if isinstance(task, TextClassifier):
        answers = [[row["label"] for row in model.predict(texts)] for model in (task, other)]
        scores = [100.0 * sum(a == str(b) for a, b in zip(given, labels)) / len(labels) for given in answers]
        metric = "accuracy"
    elif isinstance(task, TextTagger):
        answers = [[[tag for _, tag in row] for row in model.predict(texts)] for model in (task, other)]
        gold = [[str(tag) for tag in row] for row in labels]
        scores = [entity_scores(gold, given)["f1"] for given in answers]
        metric = "entity_f1"
    else:
        raise TypeError(f"precision_check takes a TextClassifier or a TextTagger, got {type(task).__name__}.")
    same = sum(a == b for a, b in zip(*answers)) / len(answers[0])
    return {
        "examples": len(answers[0]),
        "metric": metric,
        "float32": scores[0],
        precision: scores[1],
        "change": scores[1] - scores[0],
        "same_answers": same,
    }

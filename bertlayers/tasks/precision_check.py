"""How far a served precision moves a task's answers: the same fine-tuned model in float32 and in
the precision it would be exported in (`bertlayers.export`: bfloat16, int8 weights, or its TFLite
file), scored on the same labelled texts."""

from collections.abc import Sequence

from bertlayers.export.precision import in_precision
from bertlayers.metrics.entities import entity_scores
from bertlayers.tasks.text_classifier import TextClassifier
from bertlayers.tasks.text_tagger import TextTagger
from bertlayers.training.length_batching import predict_by_length

__all__ = ["precision_check"]


def precision_check(
    task: TextClassifier | TextTagger,
    texts: Sequence,
    labels: Sequence,
    precision: str = "int8",
    tflite: str | None = None,
) -> dict:
    """Score `task` (a `TextClassifier`: accuracy; a `TextTagger`: entity F1, both in points) on
    `texts` and their gold `labels` (tag lists for a tagger) in float32 and in `precision`, as
    `export_for_serving(..., precision=precision)` would serve it; with `tflite`, the ids `.tflite`
    file converted from the task's model (`export_tflite`; dynamic-range int8 with `int8=True`)
    instead, run by TFLite's interpreter on the task's own tokenization.

    Returns {"examples", "metric", "float32", precision, "change" (points, precision minus
    float32), "same_answers" (the share of texts answered alike: a label, or every word's tag)}.
    """
    if not isinstance(task, (TextClassifier, TextTagger)):
        raise TypeError(f"precision_check takes a TextClassifier or a TextTagger, got {type(task).__name__}.")
    if tflite is not None:
        from bertlayers.export.tflite import tflite_predictor  # TensorFlow's: imported only when asked

        other_outputs = tflite_predictor(tflite)
    else:
        copy = in_precision(task.model, precision)
        other_outputs = lambda x: predict_by_length(copy, x, verbose=0)  # noqa: E731
    own_outputs = lambda x: predict_by_length(task.model, x, verbose=0)  # noqa: E731
    if isinstance(task, TextClassifier):
        answers = [
            [task.labels[int(row.argmax())] for row in task._probabilities(texts, None, outputs_of)]
            for outputs_of in (own_outputs, other_outputs)
        ]
        scores = [100.0 * sum(a == str(b) for a, b in zip(given, labels)) / len(labels) for given in answers]
        metric = "accuracy"
    else:
        answers = [
            [[tag for _, tag in row] for row in task._predict_with(texts, outputs_of)]
            for outputs_of in (own_outputs, other_outputs)
        ]
        gold = [[str(tag) for tag in row] for row in labels]
        scores = [entity_scores(gold, given)["f1"] for given in answers]
        metric = "entity_f1"
    same = sum(a == b for a, b in zip(*answers)) / len(answers[0])
    return {
        "examples": len(answers[0]),
        "metric": metric,
        "float32": scores[0],
        precision: scores[1],
        "change": scores[1] - scores[0],
        "same_answers": same,
    }

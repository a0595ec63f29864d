"""The official SQuAD v1.1 / v2.0 exact-match and F1 definitions."""

import collections
import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text):
    """Lower case, drop punctuation, drop the articles a/an/the, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction, gold):
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction, gold):
    """Token-overlap F1 of normalized answers; for v2.0, an empty answer matches only an empty one."""
    predicted, expected = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not predicted or not expected:
        return float(predicted == expected)
    common = collections.Counter(predicted) & collections.Counter(expected)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(expected)
    return 2 * precision * recall / (precision + recall)


def squad_scores(predictions, gold_answers):
    """EM and F1 in percent, each the max over an example's gold answers, averaged.

    Args:
      predictions: {question_id: predicted text ("" for no answer)}.
      gold_answers: {question_id: [gold texts]}; an unanswerable question has [""] or [].

    Returns:
      {"exact_match", "f1", "total"} and, when some questions are unanswerable,
      "has_answer_*" and "no_answer_*" breakdowns as in the v2.0 scorer.
    """
    missing = sorted(set(gold_answers) - set(predictions))
    if missing:
        raise ValueError(f"No prediction for {len(missing)} questions, e.g. {missing[:3]}.")
    per_question = {}
    for qid, golds in gold_answers.items():
        golds = [g for g in golds if normalize_answer(g)] or [""]
        prediction = predictions[qid]
        per_question[qid] = (
            max(exact_match(prediction, g) for g in golds),
            max(f1(prediction, g) for g in golds),
            golds != [""],
        )
    scores = _averages(per_question.values())
    answerable = [v for v in per_question.values() if v[2]]
    unanswerable = [v for v in per_question.values() if not v[2]]
    if unanswerable:
        for name, group in (("has_answer", answerable), ("no_answer", unanswerable)):
            for key, value in _averages(group).items():
                scores[f"{name}_{key}"] = value
    return scores


def _averages(values):
    values = list(values)
    if not values:
        return {"exact_match": 0.0, "f1": 0.0, "total": 0}
    return {
        "exact_match": 100.0 * sum(v[0] for v in values) / len(values),
        "f1": 100.0 * sum(v[1] for v in values) / len(values),
        "total": len(values),
    }

"""Entity-level precision, recall and F1 over BIO tags, as conlleval and seqeval count them."""

import collections


def _split(tag):
    if tag in ("O", "", None):
        return "O", None
    prefix, _, kind = tag.partition("-")
    if prefix not in ("B", "I") or not kind:
        raise ValueError(f"Not a BIO tag: {tag!r}.")
    return prefix, kind


def entity_spans(tags):
    """(type, start, end) of each entity in a BIO sequence, end exclusive.

    conlleval's rules: an entity starts at a B- tag, or at an I- tag whose previous tag is O or
    of another type (an I- without a B- still opens an entity); it ends before the next tag
    that does not continue it.
    """
    spans, start, kind = [], None, None
    for position, tag in enumerate(list(tags) + ["O"]):
        prefix, tag_kind = _split(tag)
        continues = prefix == "I" and tag_kind == kind
        if start is not None and not continues:
            spans.append((kind, start, position))
            start, kind = None, None
        if prefix == "B" or (prefix == "I" and not continues):
            start, kind = position, tag_kind
    return spans


def entity_scores(gold_sequences, predicted_sequences):
    """Micro precision/recall/F1 (percent) over exact entity matches, plus per type."""
    if len(gold_sequences) != len(predicted_sequences):
        raise ValueError("Gold and predicted sequence counts differ.")
    found, correct, gold = collections.Counter(), collections.Counter(), collections.Counter()
    for gold_tags, predicted_tags in zip(gold_sequences, predicted_sequences):
        if len(gold_tags) != len(predicted_tags):
            raise ValueError("A predicted sequence's length differs from its gold sequence.")
        gold_spans, predicted_spans = set(entity_spans(gold_tags)), set(entity_spans(predicted_tags))
        for kind, _, _ in gold_spans:
            gold[kind] += 1
        for kind, _, _ in predicted_spans:
            found[kind] += 1
        for kind, _, _ in gold_spans & predicted_spans:
            correct[kind] += 1

    def prf(c, f, g):
        precision = 100.0 * c / f if f else 0.0
        recall = 100.0 * c / g if g else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {"precision": precision, "recall": recall, "f1": f1}

    scores = prf(sum(correct.values()), sum(found.values()), sum(gold.values()))
    scores["per_type"] = {k: prf(correct[k], found[k], gold[k]) for k in sorted(set(gold) | set(found))}
    return scores

"""Metrics against hand-computed cases and the official definitions' edge cases."""

import math

import pytest

from bertlayers.metrics import (
    accuracy, classification_metrics, entity_scores, entity_spans, f1, matthews_correlation, normalize_answer, pearson, spearman, squad_scores,
)


def test_classification_metrics_by_hand():
    labels = [1, 1, 1, 0, 0, 0, 0, 1]
    predicted = [1, 1, 0, 0, 0, 1, 0, 1]
    # tp=3 fp=1 fn=1 tn=3
    assert accuracy(labels, predicted) == 6 / 8
    assert f1(labels, predicted) == pytest.approx(2 * 3 / (2 * 3 + 1 + 1))
    assert matthews_correlation(labels, predicted) == pytest.approx((3 * 3 - 1 * 1) / math.sqrt(4 * 4 * 4 * 4))
    assert matthews_correlation([0, 0, 1], [0, 0, 0]) == 0.0  # undefined → 0, as sklearn
    # Macro F1 over three classes: class 0: tp=1 fp=0 fn=1 → 2/3; class 1: tp=1 fp=1 fn=0 → 2/3; class 2: 1.
    assert f1([0, 0, 1, 2], [0, 1, 1, 2], num_classes=3) == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)


def test_reported_f1_fits_the_label_set():
    six = classification_metrics([0, 0, 1, 2, 3, 4, 5], [0, 1, 1, 2, 3, 4, 0], ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"])
    # ABBR: tp=1 fp=1 fn=1 → 1/2; DESC: tp=1 fp=1 fn=0 → 2/3; ENTY, HUM, LOC: 1; NUM: tp=0 → 0.
    assert six["macro_f1"] == pytest.approx((1 / 2 + 2 / 3 + 3 + 0) / 6)
    assert "f1" not in six and six["per_class_f1"]["DESC"] == pytest.approx(2 / 3)
    two = classification_metrics([1, 1, 0], [1, 0, 0], ["fresh", "rotten"])
    assert two["f1"] == pytest.approx(2 / 3) and two["f1_positive_label"] == "rotten" and "macro_f1" not in two


def test_correlations_by_hand():
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # Spearman with ties: ranks of [1, 2, 2, 3] are [1, 2.5, 2.5, 4].
    assert spearman([1, 2, 2, 3], [10, 20, 30, 40]) == pytest.approx(pearson([1, 2.5, 2.5, 4], [1, 2, 3, 4]))
    assert spearman([1, 5, 10, 100], [1, 2, 3, 4]) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "text, normalized",
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("an apple a day", "apple day"),
        ("  Theory of   everything ", "theory of everything"),  # "the" inside a word stays
        ("U.S.-based", "usbased"),
        ("A", ""),
    ],
)
def test_squad_normalization(text, normalized):
    assert normalize_answer(text) == normalized


def test_squad_scores_by_hand():
    gold = {"q1": ["the big cat", "a cat"], "q2": ["Paris"], "q3": [""], "q4": []}
    predictions = {"q1": "big dog", "q2": "paris.", "q3": "", "q4": "something"}
    scores = squad_scores(predictions, gold)
    # q1: best F1 over golds: "big cat" vs "big dog" → P=R=1/2 → 0.5; vs "cat" → 0. EM 0.
    # q2: EM 1. q3: empty = empty → 1. q4: unanswerable but answered → 0.
    assert scores["exact_match"] == pytest.approx(100 * 2 / 4)
    assert scores["f1"] == pytest.approx(100 * (0.5 + 1 + 1 + 0) / 4)
    assert scores["has_answer_total"] == 2 and scores["no_answer_exact_match"] == pytest.approx(50.0)
    with pytest.raises(ValueError, match="No prediction for 1 questions"):
        squad_scores({"q1": "x"}, {"q1": ["x"], "q2": ["y"]})


def test_conlleval_entity_rules():
    # An I- after O opens an entity; a type change closes one; B- after B- starts a new one.
    assert entity_spans(["I-PER", "I-PER", "O", "B-LOC", "I-ORG", "B-LOC", "B-LOC"]) == [
        ("PER", 0, 2), ("LOC", 3, 4), ("ORG", 4, 5), ("LOC", 5, 6), ("LOC", 6, 7)
    ]
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    predicted = [["B-PER", "O", "O", "B-LOC"], ["B-ORG", "B-ORG"]]
    # Gold: PER(0,2) LOC(3,4) ORG(0,1) = 3; predicted: PER(0,1) LOC ORG ORG(1,2) = 4; correct: LOC, ORG = 2.
    scores = entity_scores(gold, predicted)
    assert scores["precision"] == pytest.approx(50.0)
    assert scores["recall"] == pytest.approx(200 / 3)
    assert scores["f1"] == pytest.approx(2 * 50 * (200 / 3) / (50 + 200 / 3))
    assert scores["per_type"]["PER"]["f1"] == 0.0  # a partial entity earns nothing
    with pytest.raises(ValueError, match="Not a BIO tag"):
        entity_spans(["X-PER"])

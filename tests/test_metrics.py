"""Metrics against hand-computed cases and the official definitions' edge cases."""

import math

import pytest

from bertlayers.metrics import (
    accuracy,
    classification_metrics,
    entity_scores,
    entity_spans,
    f1,
    matthews_correlation,
    normalize_answer,
    pearson,
    spearman,
    squad_scores,
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
    six = classification_metrics(
        [0, 0, 1, 2, 3, 4, 5], [0, 1, 1, 2, 3, 4, 0], ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"]
    )
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
        ("PER", 0, 2),
        ("LOC", 3, 4),
        ("ORG", 4, 5),
        ("LOC", 5, 6),
        ("LOC", 6, 7),
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


def test_ranking_metrics_by_hand():
    from bertlayers.metrics import mrr_at_k, ndcg_at_k, ranking_metrics, recall_at_k

    # Three queries over five documents. Ranked by score (ties: lower index first):
    #   q0: d2 d0 d1 d3 d4   relevant {0}      first hit at rank 2
    #   q1: d4 d3 d1 d0 d2   relevant {1, 2}   hits at ranks 3 and 5
    #   q2: d0 d1 d2 d3 d4   relevant {}       (all tied: index order) left out of every mean
    scores = [[0.5, 0.1, 0.9, 0.0, -1.0], [0.2, 0.3, 0.1, 0.8, 0.9], [1.0, 1.0, 1.0, 1.0, 1.0]]
    relevant = [{0}, {1, 2}, set()]
    assert mrr_at_k(scores, relevant, 10) == pytest.approx((1 / 2 + 1 / 3) / 2)
    assert mrr_at_k(scores, relevant, 2) == pytest.approx((1 / 2 + 0) / 2)  # q1's first hit is past k
    log2 = math.log2
    q0 = (1 / log2(3)) / 1.0
    q1 = (1 / log2(4) + 1 / log2(6)) / (1 / log2(2) + 1 / log2(3))
    assert ndcg_at_k(scores, relevant, 10) == pytest.approx((q0 + q1) / 2)
    assert ndcg_at_k(scores, relevant, 3) == pytest.approx(((1 / log2(3)) + (1 / log2(4)) / (1 + 1 / log2(3))) / 2)
    assert recall_at_k(scores, relevant, 1) == 0.0
    assert recall_at_k(scores, relevant, 3) == pytest.approx((1 + 1 / 2) / 2)
    assert recall_at_k(scores, relevant, 5) == 1.0
    assert ranking_metrics(scores, relevant, ks=(1, 3)) == pytest.approx(
        {"mrr@10": (1 / 2 + 1 / 3) / 2, "ndcg@10": (q0 + q1) / 2, "recall@1": 0.0, "recall@3": 0.75}
    )
    # A perfect ranking scores 1 everywhere; ties never depend on the sort.
    assert ranking_metrics([[3, 2, 1]], [{0, 1}], ks=(2,)) == {"mrr@10": 1.0, "ndcg@10": 1.0, "recall@2": 1.0}
    assert mrr_at_k([[1, 1, 1]], [{2}], 10) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="one set of documents per query"):
        mrr_at_k(scores, relevant[:2])
    with pytest.raises(ValueError, match=r"scores must be \[queries, documents\]"):
        mrr_at_k([1, 2, 3], [{0}])

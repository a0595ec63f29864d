"""Retrieval: the pairs built from paragraphs and SQuAD, BM25 by its formula, re-ranking's order, the
re-ranker's hard negatives, the dual encoder's export (text in, the Keras embedding out) and the
runner end to end."""

import json
import math
import os
import shutil

import keras
import numpy as np
import pytest
from processes import run, run_script, script

from bertlayers.families.bert import BertEncoder
from bertlayers.models import DualEncoder
from bertlayers.pretraining_data.corpus import WikipediaParagraph
from bertlayers.runs.retrieval import bm25_scores, rerank, reranker_examples
from bertlayers.task_data.retrieval import (
    RetrievalPair,
    inverse_cloze_pairs,
    read_beir,
    read_pairs,
    retrieval_set,
    squad_question_pairs,
    write_beir,
    write_pairs,
)
from bertlayers.tokenizers import bert_uncased_vocabulary, model_tokenizer

TINY = dict(
    vocabulary_size=30522, num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64, max_sequence_length=64
)
SQUAD = os.path.join(os.path.dirname(__file__), "..", "examples", "data", "squad_mini", "dev-v2.0.json")


def test_inverse_cloze_pairs_take_the_first_sentence_out_of_the_passage():
    articles = [
        [
            WikipediaParagraph("Abacus", "", ("An abacus counts.", "It has beads.", "Beads slide on rods.")),
            WikipediaParagraph(
                "Abacus", "History", ("It is old.", "Romans used one.", "So did the Chinese.", "Still used.")
            ),
            WikipediaParagraph("Abacus", "History", ("Too short.", "Two sentences.")),
        ]
    ]
    assert inverse_cloze_pairs(articles) == [
        RetrievalPair("Abacus: An abacus counts.", "It has beads. Beads slide on rods."),  # the lead: the title
        RetrievalPair(
            "History: It is old.", "Romans used one. So did the Chinese. Still used."
        ),  # the section's heading
    ]
    assert len(inverse_cloze_pairs(articles, min_sentences=2)) == 3
    with pytest.raises(ValueError, match="min_sentences must be at least 2"):
        inverse_cloze_pairs(articles, min_sentences=1)


def test_squad_questions_keep_the_answerable_ones_and_share_their_contexts(tmp_path):
    pairs = squad_question_pairs(SQUAD)
    data = json.load(open(SQUAD))
    qas = [(qa, p["context"]) for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]]
    assert [(p.query, p.passage) for p in pairs] == [
        (qa["question"], c) for qa, c in qas if not qa.get("is_impossible")
    ]
    collection = retrieval_set(pairs)
    assert len(collection.passages) == len({c for _, c in qas})  # each context once, however many questions
    assert all(collection.passages[next(iter(r))] == p.passage for r, p in zip(collection.relevant, pairs))
    write_pairs(str(tmp_path / "pairs.jsonl"), pairs)
    assert read_pairs(str(tmp_path / "pairs.jsonl")) == pairs


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"query": "q"}', r"pairs.jsonl:2: expected \{\"query\": str, \"passage\": str\}"),
        ('{"query": "q", "passage": " "}', "pairs.jsonl:2: query and passage must be non-empty strings"),
        ("not json", "pairs.jsonl:2: expected"),
    ],
)
def test_a_bad_pair_line_is_named(tmp_path, line, message):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"query": "a", "passage": "b"}\n' + line + "\n")
    with pytest.raises(ValueError, match=message):
        read_pairs(str(path))


def test_bm25_scores_follow_okapi_by_hand():
    passages = ["the red fox jumps", "a red red apple", "green grass grows", "the sky", "blue sea water"]
    scores = bm25_scores(["Red fox!"], passages, k1=1.5, b=0.75)
    lengths = [4, 4, 3, 2, 3]
    average = sum(lengths) / 5

    def term(frequency, documents_with_term, length):  # rank_bm25's idf: ln((N - n + 0.5) / (n + 0.5))
        idf = math.log((5 - documents_with_term + 0.5) / (documents_with_term + 0.5))
        return idf * frequency * 2.5 / (frequency + 1.5 * (1 - 0.75 + 0.75 * length / average))

    expected = [term(1, 2, 4) + term(1, 1, 4), term(2, 2, 4), 0, 0, 0]  # "red" in two passages, "fox" in one
    np.testing.assert_allclose(scores[0], expected, atol=1e-9)


def score_by_first_id():
    """A stand-in cross-encoder: a pair's score is its first token id (the packer below puts the
    passage's number there)."""
    inputs = {n: keras.Input((None,), dtype="int32", name=n) for n in ("token_ids", "segment_ids", "padding_mask")}
    logits = keras.layers.Lambda(lambda ids: keras.ops.cast(ids[:, :1], "float32"))(inputs["token_ids"])
    return keras.Model(inputs, {"logits": logits})


def number_packer(first, second):
    ids = np.array([[int(p.split()[-1]), 1] for p in second], "int32")
    return {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": np.ones_like(ids)}


def test_reranking_orders_the_top_k_by_the_cross_encoder_and_keeps_the_rest_below_in_order():
    passages = [f"passage {n}" for n in (5, 9, 1, 7, 3)]  # cross-encoder scores 5, 9, 1, 7, 3
    first_stage = np.array(
        [
            [0.9, 0.1, 0.8, 0.5, 0.7],  # top 3 by first stage: 0, 2, 4
            [0.0, 0.2, 0.4, 0.6, 0.8],
        ]
    )  # top 3: 4, 3, 2
    scores = rerank(first_stage, score_by_first_id(), number_packer, ["q1", "q2"], passages, top_k=3)
    order = np.argsort(-scores, axis=1, kind="stable")
    # Query 1: of {0, 2, 4}, cross scores 5, 1, 3 → 0, 4, 2; then 3 (0.5), 1 (0.1).
    # Query 2: of {4, 3, 2}, cross scores 3, 7, 1 → 3, 4, 2; then 1 (0.2), 0 (0.0).
    np.testing.assert_array_equal(order, [[0, 4, 2, 3, 1], [3, 4, 2, 1, 0]])


def test_reranker_examples_hold_the_own_passage_among_the_hardest_others():
    pairs = [RetrievalPair(f"q{i}", f"p{i}") for i in range(5)]
    first_stage = np.array(
        [
            [5, 4, 3, 2, 1],  # q0: its own p0 ranks first; hardest others p1, p2
            [5, 4, 3, 2, 1],  # q1: p0, then its own p1, then p2
            [1, 2, 3, 4, 5],
            [1, 2, 3, 4, 5],
            [1, 2, 3, 4, 5],
        ],
        "float32",
    )
    examples = reranker_examples(pairs, first_stage, negatives=2, seed=0)
    hardest = [{"p1", "p2"}, {"p0", "p2"}, {"p4", "p3"}, {"p4", "p2"}, {"p3", "p2"}]
    for example, pair, others in zip(examples, pairs, hardest):
        assert example.context == pair.query and example.choices[example.label] == pair.passage
        assert set(example.choices) - {pair.passage} == others and len(example.choices) == 3
    assert len({e.label for e in examples}) > 1
    with pytest.raises(ValueError, match="5 negatives a query need more than 5 distinct passages"):
        reranker_examples(pairs, first_stage, negatives=5)


@pytest.mark.tensorflow_only
@pytest.mark.slow
def test_an_exported_dual_encoder_serves_the_keras_embedding(tmp_path):
    import tensorflow as tf

    from bertlayers.export import export_for_serving

    model = DualEncoder(BertEncoder(**TINY))
    texts = ["a query about beads", "a passage on the abacus and its rods"]
    paths = export_for_serving(
        model, "retriever", base_dir=str(tmp_path), vocabulary=bert_uncased_vocabulary(), sequence_length=24
    )
    served = tf.saved_model.load(paths["retriever_text"]).signatures["serving_default"](text=tf.constant(texts))[
        "embedding"
    ]
    expected = model.query_embedder.predict_on_batch(model_tokenizer(bert_uncased_vocabulary()).packer(24)(texts))[
        "embedding"
    ]
    np.testing.assert_allclose(served.numpy(), expected, atol=1e-5)
    with pytest.raises(ValueError, match="two encoders serves two models: export model.query_embedder"):
        export_for_serving(DualEncoder(BertEncoder(**TINY), BertEncoder(**TINY)), "two", base_dir=str(tmp_path))


@pytest.mark.slow(reason="the retrieval runner end to end")
def test_run_retrieval_end_to_end(tmp_path):
    from bertlayers.tasks import TextReranker

    cross_encoder = os.path.join(os.path.dirname(__file__), "fixtures", "cross_encoders", "st_sigmoid")
    encoder = tmp_path / "encoder.keras"
    BertEncoder(**TINY).save(str(encoder))
    pairs = [
        RetrievalPair(f"question {i} about topic {i}", f"passage {i} telling of topic {i} at length") for i in range(12)
    ]
    write_pairs(str(tmp_path / "pairs.jsonl"), pairs)
    out = tmp_path / "out"
    write_beir(str(tmp_path / "beir_pairs"), retrieval_set(pairs[:8]))
    output = run_script(
        "run_retrieval.py",
        "--train_file",
        str(tmp_path / "pairs.jsonl"),
        "--eval_file",
        str(tmp_path / "pairs.jsonl"),
        "--beir",
        str(tmp_path / "beir_pairs"),
        "--sparse",
        os.path.join(os.path.dirname(__file__), "fixtures", "sparse_encoders", "mlm_transformer"),
        "--multi_vector",
        os.path.join(os.path.dirname(__file__), "fixtures", "multi_vector_encoders", "colbert"),
        "--init",
        str(encoder),
        "--output_dir",
        str(out),
        "--sequence_length",
        "24",
        "--query_length",
        "12",
        "--batch_size",
        "4",
        "--rerank_top_k",
        "5",
        "--matryoshka_dims",
        "8",
        "--verbose",
        "0",
    )
    metrics = json.load(open(out / "metrics.json"))
    systems = metrics["results"][f"{tmp_path.name}/pairs.jsonl"]
    expected = ["bm25", "dual_encoder", "dual_encoder_8d", "dual_encoder_reranked_top5", "hybrid_bm25_dual_encoder"]
    # splade, multi_vector: random-weight SparseEncoder and MultiVectorEncoder folders
    assert sorted(systems) == expected + ["multi_vector", "splade", "untuned"]
    beir = metrics["results"]["beir_pairs/test"]  # the same pairs' first 8 as a BEIR folder
    assert sorted(beir) == sorted(systems) and metrics["eval_sets"]["beir_pairs/test"]["queries"] == 8
    assert beir["bm25"]["mrr@10"] == 1.0 and set(beir["bm25"]) == {
        "mrr@10",
        "ndcg@10",
        "recall@1",
        "recall@10",
        "recall@100",
    }
    assert "| hybrid_bm25_dual_encoder |" in output  # the side-by-side table
    assert systems["bm25"]["mrr@10"] == 1.0  # each question's numbers are in its passage alone
    assert all(0 <= v <= 1 for s in systems.values() for v in s.values())
    assert isinstance(keras.saving.load_model(str(out / "dual_encoder" / "model.keras")), DualEncoder)
    assert keras.saving.load_model(str(out / "reranker" / "model.keras")).scorer is not None
    assert "12 training pairs" in output
    # A trained first stage reused: the same dual-encoder figures, no training of it.
    again = tmp_path / "again"
    run_script(
        "run_retrieval.py",
        "--train_file",
        str(tmp_path / "pairs.jsonl"),
        "--eval_file",
        str(tmp_path / "pairs.jsonl"),
        "--init",
        str(encoder),
        "--output_dir",
        str(again),
        "--sequence_length",
        "24",
        "--query_length",
        "12",
        "--first_stage",
        str(out / "dual_encoder" / "model.keras"),
        "--rerank_top_k",
        "5",
        "--reranker_init",  # a re-ranker from a sentence-transformers CrossEncoder folder, fine-tuned
        cross_encoder,
        "--negatives",
        "2",
        "--verbose",
        "0",
    )
    reused = json.load(open(again / "metrics.json"))["results"][f"{tmp_path.name}/pairs.jsonl"]
    assert reused["dual_encoder"] == pytest.approx(systems["dual_encoder"]) and not (again / "dual_encoder").exists()
    assert reused["dual_encoder_8d"] == pytest.approx(systems["dual_encoder_8d"])  # trained with Matryoshka
    assert {"dual_encoder_cross_encoder_untuned_top5", "dual_encoder_cross_encoder_reranked_top5"} <= set(reused)
    tuned, untuned = (
        TextReranker.load(str(again / "reranker" / "model.keras")),
        TextReranker.from_checkpoint(cross_encoder),
    )
    assert tuned.activation == "sigmoid" and tuned.sequence_length == 36  # the folder's, at the run's pair length
    moved = [np.abs(a - b).max() for a, b in zip(tuned.model.get_weights(), untuned.model.get_weights(), strict=True)]
    assert max(moved) > 0, "the cross-encoder was not fine-tuned"
    done = run(
        script(
            "run_retrieval.py",
            "--train_file",
            str(tmp_path / "pairs.jsonl"),
            "--eval_file",
            str(tmp_path / "pairs.jsonl"),
            "--first_stage",
            str(out / "reranker" / "model.keras"),
            "--output_dir",
            str(tmp_path / "bad"),
        ),
        expect=2,
    )
    assert "holds a MultipleChoice, not a DualEncoder" in done.stderr and not (tmp_path / "bad").exists()


def test_a_beir_folder_is_scored_as_the_official_scorers_score_it(tmp_path):
    """A BEIR folder (graded qrels, a grade 0 among them, a query never judged, titles on some
    documents) read and scored: nDCG@10 and recall@10 / @100 equal pytrec_eval's, MRR@10 BEIR's own
    (tests/fixtures/record_beir_metrics.py); written back by write_beir, it reads the same."""
    from bertlayers.metrics import ranking_metrics

    reference = np.load(os.path.join(os.path.dirname(__file__), "fixtures", "beir_mini.npz"))
    folder = os.path.join(os.path.dirname(__file__), "fixtures", "beir_mini")
    evaluation, query_ids, document_ids = read_beir(folder)
    assert len(query_ids) == 12 and "q12" not in query_ids and len(document_ids) == len(evaluation.passages) == 150
    assert evaluation.passages[0].startswith("Title 0 ") and not evaluation.passages[1].startswith(" ")
    found = ranking_metrics(reference["scores"], evaluation.relevant, ks=(10, 100))
    for name in ("ndcg@10", "recall@10", "recall@100", "mrr@10"):
        assert found[name] == pytest.approx(float(reference[name]), abs=1e-12), name
    again, _, _ = read_beir(write_beir(str(tmp_path / "again"), evaluation))
    assert (again.queries, again.passages, again.relevant) == (
        evaluation.queries,
        evaluation.passages,
        evaluation.relevant,
    )
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    with open(broken / "qrels" / "test.tsv", "a", encoding="utf-8") as f:
        f.write("q3\tdoc999\t1\n")
    with pytest.raises(ValueError, match=r"test.tsv:\d+: document 'doc999' is not in corpus.jsonl"):
        read_beir(str(broken))
    with pytest.raises(FileNotFoundError, match=r"qrels/dev.tsv is missing"):
        read_beir(folder, split="dev")


def test_hybrid_scores_fuse_each_querys_scaled_scores():
    from bertlayers.runs.retrieval import hybrid_scores

    lexical, dense = np.array([[2.0, 4.0, 6.0], [1.0, 1.0, 1.0]]), np.array([[0.5, 0.1, 0.3], [0.2, 0.4, 0.0]])
    fused = hybrid_scores(lexical, dense, weight=0.25)
    np.testing.assert_allclose(fused[0], 0.25 * np.array([0, 0.5, 1]) + 0.75 * np.array([1, 0, 0.5]))
    np.testing.assert_allclose(fused[1], 0.75 * np.array([0.5, 1, 0]))  # equal scores scale to 0
    with pytest.raises(ValueError, match=r"weight must be in \[0, 1\]"):
        hybrid_scores(lexical, dense, weight=2)

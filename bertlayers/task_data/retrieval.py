"""Retrieval data: (query, passage) pairs, and the collections they are evaluated as.

A file is JSON lines of {"query", "passage"} (sentence-transformers' pair format). For evaluation
its distinct passages are the collection searched, and each query's relevant passage is its own
(`RetrievalSet`); several queries may share a passage (questions about one context).

Two real sources:
- `inverse_cloze_pairs`: paragraphs of Wikipedia articles. The query is the paragraph's heading
  (its section's, else the article's title) with its first sentence; the passage is the rest of the
  paragraph. The sentence leaves the passage, as in ORQA's inverse cloze task, so a query is found
  by what it means and not by copying (kept, every query would be a substring of its passage).
- `squad_question_pairs`: the answerable questions of a SQuAD-format file and their contexts.
"""

import dataclasses
import json

from bertlayers.utils.text_files import json_value, numbered_lines


@dataclasses.dataclass(frozen=True)
class RetrievalPair:
    query: str
    passage: str


@dataclasses.dataclass(frozen=True)
class RetrievalSet:
    """Queries, the collection, and for each query the indices of its relevant passages."""

    queries: list
    passages: list
    relevant: list  # one set of passage indices a query


def inverse_cloze_pairs(articles, min_sentences=3):
    """A pair for each paragraph of at least `min_sentences` sentences: "heading: first sentence"
    → the paragraph's other sentences. `articles`: lists of `WikipediaParagraph`s
    (`bertlayers.pretraining_data.corpus.read_wikipedia_paragraphs`)."""
    if min_sentences < 2:
        raise ValueError(f"min_sentences must be at least 2 (a query sentence and a passage), got {min_sentences}.")
    return [
        RetrievalPair(f"{p.section or p.title}: {p.sentences[0]}", " ".join(p.sentences[1:]))
        for paragraphs in articles
        for p in paragraphs
        if len(p.sentences) >= min_sentences
    ]


def squad_question_pairs(path):
    """(question, its context) for every answerable question of a SQuAD v1.1 / v2.0 file."""
    from bertlayers.task_data.squad import read_squad

    return [RetrievalPair(e.question, e.context) for e in read_squad(path) if not e.is_impossible]


def write_pairs(path, pairs):
    """JSON lines: {"query", "passage"} (atomically)."""
    from bertlayers.utils import atomic_files

    atomic_files.write_text(path, "".join(json.dumps({"query": p.query, "passage": p.passage}) + "\n" for p in pairs))


def read_pairs(path):
    """The pairs of a JSON lines file; a line that is not one names its place."""
    pairs = []
    for number, line in numbered_lines(path):
        if not line.strip():
            continue
        try:
            record = json_value(line, f"{path}:{number}")
            query, passage = record["query"], record["passage"]
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise ValueError(f'{path}:{number}: expected {{"query": str, "passage": str}} ({error}).') from None
        if not (isinstance(query, str) and isinstance(passage, str) and query.strip() and passage.strip()):
            raise ValueError(f"{path}:{number}: query and passage must be non-empty strings.")
        pairs.append(RetrievalPair(query, passage))
    if not pairs:
        raise ValueError(f"{path} holds no pairs.")
    return pairs


def retrieval_set(pairs):
    """The pairs as an evaluation: the distinct queries and passages (each in first-seen order),
    and each query's relevant passages: a query on several lines has all their passages relevant,
    as qrels list them (scored as separate queries, each line would count the others' passages as
    wrong answers)."""
    passages, queries, relevant = {}, {}, []
    for pair in pairs:
        passage = passages.setdefault(pair.passage, len(passages))
        query = queries.setdefault(pair.query, len(queries))
        if query == len(relevant):
            relevant.append(set())
        relevant[query].add(passage)
    return RetrievalSet(list(queries), list(passages), relevant)


def check_training_pairs(pairs, batch_size, source):
    """Refuse training pairs that in-batch negatives cannot learn from: each row's negatives are the
    other rows' passages, so one pair (or a batch of one) has none and trains at loss 0, and rows
    that all share a query or a passage make every "negative" a positive."""
    if len(pairs) < 2 or batch_size < 2:
        raise ValueError(
            f"{source}: in-batch negatives need at least two pairs a batch; got {len(pairs)} pair(s) and "
            f"--batch_size {batch_size}."
        )
    for what in ("query", "passage"):
        if len({getattr(p, what) for p in pairs}) < 2:
            raise ValueError(f"{source}: every pair has the same {what}; in-batch negatives need pairs that differ.")

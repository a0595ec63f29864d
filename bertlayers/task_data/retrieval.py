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

And the field's evaluation format: a BEIR folder (`read_beir`: corpus.jsonl, queries.jsonl,
qrels/<split>.tsv with graded relevance), written from pairs by `write_beir`.
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
    """Queries, the collection, and for each query its relevant passages: a set of passage
    indices (binary relevance), or {passage index: grade} (graded, as BEIR's qrels)."""

    queries: list
    passages: list
    relevant: list  # one set of passage indices (or {index: grade}) a query


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


def _jsonl_records(path, fields):
    """{"_id": ..., field: ...} records of a BEIR JSON lines file, each field a string."""
    records = []
    for number, line in numbered_lines(path):
        if not line.strip():
            continue
        try:
            record = json_value(line, f"{path}:{number}")
            values = [record["_id"]] + [
                record.get(field, "") if field == "title" else record[field] for field in fields
            ]
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            wanted = ", ".join(["_id", *fields])
            raise ValueError(f"{path}:{number}: expected a JSON object with {wanted} ({error!r}).") from None
        if not all(isinstance(v, (str, int)) for v in values[:1]) or not all(isinstance(v, str) for v in values[1:]):
            raise ValueError(f"{path}:{number}: _id must be a string or number and {', '.join(fields)} strings.")
        records.append([str(values[0]), *values[1:]])
    return records


def read_beir(folder: str, split: str = "test") -> tuple[RetrievalSet, list, list]:
    """A BEIR folder as an evaluation: `(RetrievalSet, query ids, document ids)`.

    corpus.jsonl: {"_id", "title", "text"} a document, searched as "title text" (BEIR's models
    read the two joined by a space); queries.jsonl: {"_id", "text"}; qrels/<split>.tsv:
    query-id, corpus-id, score (a header line first). Only the queries with a judgement in the
    split are evaluated, as BEIR evaluates; a query's relevant documents are {index: grade} with
    grades of 1 and more (a grade 0 judges a document not relevant). A judgement naming a query or
    a document that is not there is refused with its file and line.
    """
    import os

    paths = {name: os.path.join(folder, name) for name in ("corpus.jsonl", "queries.jsonl")}
    paths["qrels"] = os.path.join(folder, "qrels", f"{split}.tsv")
    for path in paths.values():
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"{path} is missing: a BEIR folder holds corpus.jsonl, queries.jsonl, qrels/{split}.tsv."
            )
    corpus = _jsonl_records(paths["corpus.jsonl"], ("title", "text"))
    document_index = {}
    for position, (doc_id, _, _) in enumerate(corpus):
        if document_index.setdefault(doc_id, position) != position:
            raise ValueError(f"{paths['corpus.jsonl']}: document _id {doc_id!r} appears twice.")
    query_text = {query_id: text for query_id, text in _jsonl_records(paths["queries.jsonl"], ("text",))}
    judged = {}
    for number, line in numbered_lines(paths["qrels"]):
        fields = line.rstrip("\n").split("\t")
        if number == 1 and fields[:1] == ["query-id"] or not line.strip():
            continue
        if len(fields) != 3 or not fields[2].strip().lstrip("-").isdigit():
            raise ValueError(
                f"{paths['qrels']}:{number}: expected query-id<TAB>corpus-id<TAB>integer score, got {line!r}."
            )
        query_id, doc_id, grade = fields[0], fields[1], int(fields[2])
        if query_id not in query_text:
            raise ValueError(f"{paths['qrels']}:{number}: query {query_id!r} is not in queries.jsonl.")
        if doc_id not in document_index:
            raise ValueError(f"{paths['qrels']}:{number}: document {doc_id!r} is not in corpus.jsonl.")
        judgements = judged.setdefault(query_id, {})
        if grade > 0:
            judgements[document_index[doc_id]] = grade
    query_ids = [q for q in judged if judged[q]]
    if not query_ids:
        raise ValueError(f"{paths['qrels']} judges no document relevant to any query.")
    documents = [f"{title} {text}".strip() for _, title, text in corpus]
    evaluation = RetrievalSet([query_text[q] for q in query_ids], documents, [judged[q] for q in query_ids])
    return evaluation, query_ids, [doc_id for doc_id, _, _ in corpus]


def write_beir(folder: str, evaluation: RetrievalSet, split: str = "test") -> str:
    """`evaluation` as a BEIR folder (documents and queries numbered d0, d1, ... and q0, q1, ...;
    grade 1 for a set's relevant passages), atomically; an existing folder is refused."""
    import os

    from bertlayers.utils import atomic_files

    if os.path.exists(folder):
        raise FileExistsError(f"{folder} exists; write_beir writes a new folder.")
    with atomic_files.atomic_path(folder) as staging:
        os.makedirs(os.path.join(staging, "qrels"))
        lines = [json.dumps({"_id": f"d{i}", "title": "", "text": text}) for i, text in enumerate(evaluation.passages)]
        atomic_files.write_text(os.path.join(staging, "corpus.jsonl"), "\n".join(lines) + "\n")
        lines = [json.dumps({"_id": f"q{i}", "text": text}) for i, text in enumerate(evaluation.queries)]
        atomic_files.write_text(os.path.join(staging, "queries.jsonl"), "\n".join(lines) + "\n")
        rows = ["query-id\tcorpus-id\tscore"]
        for i, relevant in enumerate(evaluation.relevant):
            grades = relevant if isinstance(relevant, dict) else {index: 1 for index in sorted(relevant)}
            rows += [f"q{i}\td{index}\t{grade}" for index, grade in grades.items()]
        atomic_files.write_text(os.path.join(staging, "qrels", f"{split}.tsv"), "\n".join(rows) + "\n")
    return folder

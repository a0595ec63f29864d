"""SQuAD v1.1 / v2.0 data: reading, pieces with character offsets, windows, answer decoding.

Answers map back to the original context through each piece's character span in the original
text, never by joining pieces back into words: the spans the model's in-graph tokenizer gives, as
its served answerer computes them. WordPieces get their own spans; a byte-level BPE or
SentencePiece checkpoint's pieces get their whitespace-delimited word's (google-research/bert's
`doc_tokens`), so its answers are whole words.
"""

import collections
import dataclasses
import json

import numpy as np

from bertlayers.startup import require_tensorflow
from bertlayers.utils.text_files import json_value, read_text

tf = require_tensorflow(__name__)


@dataclasses.dataclass
class SquadExample:
    qid: str
    question: str
    context: str
    answers: list  # [(text, start_char)]
    is_impossible: bool


def _field(record, key, kind, where):
    """record[key], which must be a `kind`; a ValueError naming `where` and the key otherwise."""
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}.")
    if key not in record:
        raise ValueError(f"{where}: no {key!r} field (the fields are {sorted(record)}).")
    value = record[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ValueError(f"{where}: {key!r} must be of type {names}, got {value!r:.60}.")
    return value


def read_squad(path):
    """Examples of a SQuAD v1.1 / v2.0 JSON file.

    Every structural problem is a ValueError naming the file and where in it (article,
    paragraph, question id): missing keys, wrong types, an answer whose offset does not match
    the context, a file without questions.
    """
    try:
        data = json_value(read_text(path), path)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{error.lineno}: not valid JSON ({error.msg}).") from None
    articles = _field(data, "data", list, f"{path} (top level)")
    examples, seen = [], {}
    for a, article in enumerate(articles):
        for p, paragraph in enumerate(_field(article, "paragraphs", list, f"{path}: data[{a}]")):
            where = f"{path}: data[{a}].paragraphs[{p}]"
            context = _field(paragraph, "context", str, where)
            for q, qa in enumerate(_field(paragraph, "qas", list, where)):
                qid = str(_field(qa, "id", (str, int), f"{where}.qas[{q}]"))
                where_q = f"{path}: question {qid}"
                here = f"data[{a}].paragraphs[{p}].qas[{q}]"
                if qid in seen:  # predictions and scores are keyed by id: one would hide the other
                    raise ValueError(f"{where_q} appears twice (at {seen[qid]} and {here}); ids must be unique.")
                seen[qid] = here
                question = _field(qa, "question", str, where_q)
                # A JSON boolean: the string "false" is truthy and would drop the question's answers.
                impossible = _field(qa, "is_impossible", bool, where_q) if "is_impossible" in qa else False
                answers = []
                for answer in _field(qa, "answers", list, where_q) if "answers" in qa or not impossible else []:
                    text = _field(answer, "text", str, where_q)
                    start = _field(answer, "answer_start", int, where_q)
                    if not text.strip():
                        raise ValueError(f"{where_q}: an answer's text is empty.")
                    if start < 0 or start + len(text) > len(context):
                        raise ValueError(
                            f"{where_q}: answer_start {start} with an answer of {len(text)} characters lies outside "
                            f"its context of {len(context)} characters."
                        )
                    if context[start : start + len(text)] != text:
                        raise ValueError(
                            f"{where_q}: answer {text!r} is not at character {start} "
                            f"of its context (found {context[start : start + len(text)]!r})."
                        )
                    answers.append((text, start))
                if not impossible and not answers:
                    raise ValueError(f"{where_q} has no answer and is not marked is_impossible.")
                examples.append(SquadExample(qid, question, context, answers, impossible))
    if not examples:
        raise ValueError(f"{path} holds no questions.")
    return examples


# --- WordPieces with character offsets -----------------------------------------------------


def tokenize_with_offsets(texts, tokenizer):
    """For each text, a list of (token id, start char, end char, word) over the original text:
    the pieces the served graph makes (`CheckpointTokenizer.tokenize_with_offsets`: WordPieces
    each placed in the text, other tokenizers' pieces spanning their whitespace-delimited word),
    with their byte spans turned into character spans; `word` numbers the word (or punctuation
    mark) each piece belongs to."""
    if not texts:
        return []
    ids, starts, ends, starts_word, _ = (
        x.to_list() for x in tokenizer.tokenize_with_offsets(tf.constant(texts, tf.string))
    )
    results = []
    for text, row in zip(texts, zip(ids, starts, ends, starts_word)):
        # Byte b of the UTF-8 text lies in character char_at[b]; one more entry for the end.
        char_at = [index for index, char in enumerate(text) for _ in char.encode("utf-8")] + [len(text)]
        words = np.cumsum(row[3]) - 1  # each piece's word number
        results.append([(int(i), char_at[s], char_at[e], int(w)) for i, s, e, w in zip(row[0], row[1], row[2], words)])
    return results


# --- Windows ------------------------------------------------------------------------------


@dataclasses.dataclass
class SquadFeatures:
    """Encoder inputs and targets of every window, and what decoding needs."""

    inputs: dict  # token_ids, segment_ids, padding_mask, span_mask: int32 [windows, seq]
    start_positions: np.ndarray  # [windows]; the null position when the window has no answer
    end_positions: np.ndarray
    example_index: np.ndarray  # [windows] → index into the examples
    token_spans: list  # per window: {position: (start char, end char)} of its context tokens
    word_edges: list  # per window: {position: (starts a word, ends a word)} of its context tokens
    max_context: list  # per window: {position: bool}, True where this window gives the token most context
    null_positions: np.ndarray = None  # [windows]: the summary token ([CLS]: 0; XLNet's <cls>: after the context)


def make_windows(examples, tokenizer, sequence_length=384, doc_stride=128, max_query_length=64):
    """Split each (question, context) into windows `[CLS] question [SEP] context-part [SEP]`
    (or the tokenizer's family's layout: RoBERTa's `<s> Q </s></s> C </s>`, XLNet's
    `Q <sep> C <sep> <cls>`), padded on the right.

    `tokenizer`: the model's `CheckpointTokenizer` (`ModelTokenizer.in_graph()`: what its served
    answerer tokenizes with). Contexts longer than a window are covered by windows `doc_stride`
    tokens apart. A window
    whose context part holds the whole gold answer targets its first and last tokens; others
    target the summary token (`[CLS]`, XLNet's `<cls>`: no answer here). `span_mask` is 1 on
    the context tokens and on that token.
    """
    if not examples:
        raise ValueError("make_windows: no questions to window.")
    layout = _null_answer_layout(tokenizer)
    end_segments = [
        layout.second_segment if s is None else s for s in (layout.end_segments or (None,) * len(layout.end))
    ]
    questions = tokenize_with_offsets([e.question for e in examples], tokenizer)
    contexts = tokenize_with_offsets([e.context for e in examples], tokenizer)
    rows = collections.defaultdict(list)
    token_spans, word_edges, max_context = [], [], []
    for index, (example, question, context) in enumerate(zip(examples, questions, contexts)):
        query = [t for t, *_ in question][:max_query_length]
        room = sequence_length - len(query) - layout.special_tokens(pair=True)
        if room <= 0:
            raise ValueError(
                f"Question {example.qid}: sequence_length {sequence_length} leaves no room for the context."
            )
        answer = None
        if example.answers and not example.is_impossible:
            text, start_char = example.answers[0]
            end_char = start_char + len(text)
            covered = [i for i, (_, s, e, _) in enumerate(context) if s < end_char and e > start_char]
            if covered:
                answer = (covered[0], covered[-1])
        windows, start = [], 0
        while True:
            length = min(room, len(context) - start)
            windows.append((start, length))
            if start + length >= len(context):
                break
            start += min(length, doc_stride)
        for window_start, length in windows:
            ids = [
                *layout.start,
                *query,
                *layout.between,
                *(t for t, *_ in context[window_start : window_start + length]),
                *layout.end,
            ]
            offset = len(layout.start) + len(query) + len(layout.between)
            # The summary token: the first ([CLS], <s>), or XLNet's <cls> at the end.
            null = 0 if layout.start else len(ids) - 1
            spans, edges, best = {}, {}, {}
            words = [None] + [w for *_, w in context] + [None]
            for k in range(length):
                token = window_start + k
                spans[offset + k] = context[token][1:3]
                word = words[token + 1]
                edges[offset + k] = (words[token] != word, words[token + 2] != word)
                best[offset + k] = _has_max_context(windows, window_start, token)
            target = (null, null)
            if answer and window_start <= answer[0] and answer[1] < window_start + length:
                target = (offset + answer[0] - window_start, offset + answer[1] - window_start)
            padding = sequence_length - len(ids)
            rows["token_ids"].append(ids + [layout.pad_id] * padding)
            rows["segment_ids"].append([0] * offset + [layout.second_segment] * length + end_segments + [0] * padding)
            rows["padding_mask"].append([1] * len(ids) + [0] * padding)
            span_mask = [0] * offset + [1] * length + [0] * (len(layout.end) + padding)
            span_mask[null] = 1
            rows["span_mask"].append(span_mask)
            rows["null"].append(null)
            rows["start"].append(target[0])
            rows["end"].append(target[1])
            rows["example"].append(index)
            token_spans.append(spans)
            word_edges.append(edges)
            max_context.append(best)
    inputs = {k: np.array(rows[k], "int32") for k in ("token_ids", "segment_ids", "padding_mask", "span_mask")}
    return SquadFeatures(
        inputs,
        np.array(rows["start"], "int32"),
        np.array(rows["end"], "int32"),
        np.array(rows["example"], "int32"),
        token_spans,
        word_edges,
        max_context,
        np.array(rows["null"], "int32"),
    )


def _null_answer_layout(tokenizer):
    """The tokenizer's layout, refused where no special token can hold SQuAD's null answer."""
    layout = tokenizer.layout
    if not layout.start and not layout.end:
        # The null answer would sit on the context's last token, itself an answer position.
        raise ValueError(
            "make_windows: the tokenizer's layout puts no special token before or after the texts (a decoder's "
            "tokenizer without a template), so no token can hold SQuAD's null answer; use a tokenizer whose "
            "tokenizer.json adds one (its post_processor)."
        )
    return layout


def _has_max_context(windows, current_start, token):
    """BERT's rule: a token belongs to the window where min(left, right) context, plus a small
    bonus for longer windows, is largest."""
    best_score, best_start = None, None
    for start, length in windows:
        end = start + length - 1
        if not start <= token <= end:
            continue
        score = min(token - start, end - token) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_start = score, start
    return best_start == current_start


# --- Decoding -----------------------------------------------------------------------------


def decode_answers(
    examples,
    features,
    start_logits,
    end_logits,
    n_best_size=20,
    max_answer_length=30,
    version_2=False,
    null_score_diff_threshold=0.0,
):
    """Best answer text per question id, from the windows' start/end logits.

    Candidates are the n-best starts × n-best ends of each window with end ≥ start, length ≤
    `max_answer_length` tokens, both inside the context, the start on a word's first piece and
    the end on a word's last piece (no answer cut inside a word), and the start where its window
    gives it the most context; a span scores start + end logit. For v2.0 the null answer (the
    summary token, [CLS]) scores the lowest such pair over the windows, and wins when it beats the best span by more than
    `null_score_diff_threshold`. The text is cut from the original context by character offsets.

    Returns:
      ({qid: text ("" for no answer)}, {qid: [n-best candidates]}).
    """
    start_logits, end_logits = np.asarray(start_logits), np.asarray(end_logits)
    by_example = collections.defaultdict(list)
    for window, example_index in enumerate(features.example_index):
        by_example[int(example_index)].append(window)
    predictions, nbest = {}, {}
    for index, example in enumerate(examples):
        candidates, null_score = [], None
        for window in by_example[index]:
            starts, ends = start_logits[window], end_logits[window]
            spans, best, edges = features.token_spans[window], features.max_context[window], features.word_edges[window]
            null = 0 if features.null_positions is None else int(features.null_positions[window])
            score = float(starts[null] + ends[null])
            null_score = score if null_score is None else min(null_score, score)
            for s in np.argsort(starts)[::-1][:n_best_size]:
                if s not in spans or not best[s] or not edges[s][0]:
                    continue
                for e in np.argsort(ends)[::-1][:n_best_size]:
                    if e not in spans or e < s or e - s + 1 > max_answer_length or not edges[e][1]:
                        continue
                    first, last = spans[s][0], spans[e][1]
                    candidates.append((float(starts[s] + ends[e]), example.context[first:last], first))
        candidates.sort(key=lambda c: -c[0])
        nbest[example.qid] = [{"text": t, "score": s, "start_char": c} for s, t, c in candidates[:n_best_size]]
        best_text = candidates[0][1] if candidates else ""
        if version_2 and (not candidates or null_score - candidates[0][0] > null_score_diff_threshold):
            best_text = ""
        predictions[example.qid] = best_text
    return predictions, nbest

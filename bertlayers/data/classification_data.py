"""Text classification data: TSV / CSV / JSONL files with one or two text columns and a label."""

import csv
import dataclasses
import json
import os
import warnings

import numpy as np


@dataclasses.dataclass
class TextExample:
    where: str  # "file:line", for messages
    text_a: str
    text_b: str = None
    label: object = None


def _rows(path, file_format):
    """(line number, row dict) pairs."""
    if file_format == "jsonl":
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        yield number, json.loads(line)
                    except json.JSONDecodeError as error:
                        raise ValueError(f"{path}:{number}: not valid JSON ({error.msg}).") from None
        return
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t" if file_format == "tsv" else ",")
        for row in reader:
            yield reader.line_num, row


def read_text_examples(path, text_a="text", text_b=None, label="label", require_label=True, file_format="auto"):
    """Examples of a TSV, CSV or JSONL file.

    Raises a ValueError naming the file (and line) for a missing column, an empty text, or a
    missing label when `require_label`.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No data file at {path}.")
    if file_format == "auto":
        file_format = {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl"}.get(
            os.path.splitext(path)[1].lower()
        )
        if file_format is None:
            raise ValueError(f"{path}: cannot tell the format from the extension; use .tsv, .csv or .jsonl.")
    examples = []
    needed = [c for c in (text_a, text_b) if c] + ([label] if require_label else [])
    for number, row in _rows(path, file_format):
        missing = [c for c in needed if c not in row]
        if missing:
            raise ValueError(f"{path}:{number}: no column {missing[0]!r}; the columns are {sorted(row)}.")
        texts = []
        for column in (text_a, text_b):
            if column is None:
                texts.append(None)
                continue
            value = str(row[column] or "").strip()
            if not value:
                raise ValueError(f"{path}:{number}: empty text in column {column!r}.")
            texts.append(value)
        value = row.get(label) if label else None
        if require_label and (value is None or str(value).strip() == ""):
            raise ValueError(f"{path}:{number}: no label in column {label!r}.")
        examples.append(TextExample(f"{path}:{number}", texts[0], texts[1], value))
    if not examples:
        raise ValueError(f"{path} holds no examples.")
    return examples


class LabelMap:
    """Label strings ↔ class ids, fixed by the training data (sorted)."""

    def __init__(self, labels):
        self.labels = sorted({str(label) for label in labels})

    def encode(self, examples):
        index = {label: i for i, label in enumerate(self.labels)}
        ids = []
        for example in examples:
            label = str(example.label)
            if label not in index:
                raise ValueError(
                    f"{example.where}: unknown label {label!r}; the model knows {self.labels}."
                )
            ids.append(index[label])
        return np.array(ids, "int32")


def encode_examples(packer, examples, source):
    """Pack examples into encoder inputs; over-long ones are truncated with one warning that counts them."""
    tokenizer = packer.tokenizer
    first = [e.text_a for e in examples]
    second = [e.text_b for e in examples] if examples[0].text_b is not None else None
    lengths = np.array([len(t) for t in _token_lists(tokenizer, first)]) + 2
    if second is not None:
        lengths += np.array([len(t) for t in _token_lists(tokenizer, second)]) + 1
    over = int(np.sum(lengths > packer.sequence_length))
    if over:
        warnings.warn(
            f"{over} of {len(examples)} examples in {source} are longer than sequence_length "
            f"{packer.sequence_length} tokens and were truncated.",
            stacklevel=2,
        )
    features = [packer(first[i : i + 512], None if second is None else second[i : i + 512]) for i in range(0, len(first), 512)]
    return {key: np.concatenate([f[key] for f in features]) for key in features[0]}


def _token_lists(tokenizer, texts):
    import tensorflow as tf

    result = tokenizer(tf.constant(texts))
    return result.to_list() if hasattr(result, "to_list") else result

"""Text classification data: TSV / CSV / JSONL files with one or two text columns and a label."""

import csv
import dataclasses
import json
import logging
import math
import os

import numpy as np

from bertlayers.utils.text_files import json_value, numbered_lines

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class TextExample:
    where: str  # "file:line", for messages
    text_a: str
    text_b: str = None
    label: object = None


def _rows(path, file_format):
    """(line number, row dict) pairs, each row parsed as its format defines.

    TSV: one row per line, fields split at tabs, quote characters kept as text (a review that
    begins with `"` stays one row). CSV: RFC 4180 quoting (a quoted field may span lines; the
    row is named by the line it starts on). Any row whose field count differs from the header's
    is an error naming its line, never merged into another row or shifted into another column.
    """
    lines = numbered_lines(path)
    if file_format == "jsonl":
        for number, line in lines:
            if line.strip():
                try:
                    row = json_value(line, f"{path}:{number}")
                except json.JSONDecodeError as error:
                    raise ValueError(f"{path}:{number}: not valid JSON ({error.msg}).") from None
                if not isinstance(row, dict):
                    raise ValueError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}.")
                yield number, row
        return
    if file_format == "tsv":
        options = {"delimiter": "\t", "quoting": csv.QUOTE_NONE}
    else:
        options = {"delimiter": ",", "strict": True}
    reader = csv.reader((line for _, line in lines), **options)
    header, start = None, 1
    while True:
        start = reader.line_num + 1
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise ValueError(
                f"{path}:{start}: the row starting here does not parse as CSV ({error}); "
                f"a field with a comma, quote or line break must be quoted, with quotes doubled inside."
            ) from None
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            continue
        if header is None:
            header = [name.strip() for name in fields]
            continue
        if len(fields) != len(header):
            raise ValueError(
                f"{path}:{start}: {len(fields)} fields, but the header has {len(header)} ({header}); "
                f"a stray separator in a text? In CSV, quote such texts."
            )
        yield start, dict(zip(header, fields))


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
            raw = row[column]
            if raw is not None and not isinstance(raw, str):
                raise ValueError(f"{path}:{number}: column {column!r} holds a {type(raw).__name__}, not a text.")
            value = (raw or "").strip()
            if not value:
                raise ValueError(f"{path}:{number}: empty text in column {column!r}.")
            texts.append(value)
        value = row.get(label) if label else None
        if isinstance(value, (dict, list)):
            raise ValueError(f"{path}:{number}: label column {label!r} holds a {type(value).__name__}.")
        if isinstance(value, str):
            value = value.strip()  # " 1" and "1" are one class
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"{path}:{number}: label {value} in column {label!r} is not a finite number.")
            if value.is_integer():
                value = int(value)  # JSON's 1 and 1.0 are one class
        if require_label and (value is None or str(value).strip() == ""):
            raise ValueError(f"{path}:{number}: no label in column {label!r}.")
        examples.append(TextExample(f"{path}:{number}", texts[0], texts[1], value))
    if not examples:
        raise ValueError(f"{path} holds no examples.")
    return examples


class LabelMap:
    """Label strings ↔ class ids, fixed by the training data (sorted).

    Raises a ValueError naming `source` when the labels hold fewer than two classes: a
    one-class "classifier" learns nothing and scores perfect accuracy.
    """

    def __init__(self, labels, source="the training data"):
        self.labels = sorted({str(label) for label in labels})
        numbers = {}
        for label in self.labels:
            try:
                numbers.setdefault(float(label), []).append(label)
            except ValueError:
                pass
        clashes = [spellings for spellings in numbers.values() if len(spellings) > 1]
        if clashes:
            raise ValueError(
                f"{source} writes one number as different labels ({'; '.join(' and '.join(map(repr, c)) for c in clashes)}): "
                f"they would train as different classes. Write each class one way."
            )
        if len(self.labels) < 2:
            raise ValueError(
                f"{source} has {len(self.labels)} label value(s) {self.labels}; classification needs at least "
                f"two classes (numeric targets: use regression)."
            )

    def encode(self, examples):
        index = {label: i for i, label in enumerate(self.labels)}
        ids = []
        for example in examples:
            label = str(example.label)
            if label not in index:
                raise ValueError(f"{example.where}: unknown label {label!r}; the model knows {self.labels}.")
            ids.append(index[label])
        return np.array(ids, "int32")


def regression_targets(examples):
    """float32 `[n, 1]` targets; a label that is not a number is a ValueError naming its line."""
    targets = []
    for example in examples:
        try:
            target = float(example.label)
        except (TypeError, ValueError):
            raise ValueError(f"{example.where}: regression label {example.label!r} is not a number.") from None
        if not math.isfinite(target):
            raise ValueError(f"{example.where}: regression label {example.label!r} is not a finite number.")
        targets.append(target)
    return np.array(targets, "float32")[:, None]


def held_out(examples: list, fraction: float, seed: int, source: str) -> tuple[list, list]:
    """(kept, held out): a `fraction` of `examples` drawn with `seed` (the same every run), held out
    to validate and score on, both in the file's order; a ValueError naming `source` when either
    part would be empty."""
    count = round(len(examples) * fraction)
    if not 0 < count < len(examples):
        raise ValueError(
            f"{source}: holding out {fraction:g} of its {len(examples)} examples leaves "
            f"{'none held out' if count == 0 else 'none to train on'}; give another fraction or an eval file."
        )
    chosen = set(np.random.default_rng(seed).permutation(len(examples))[:count].tolist())
    kept = [example for i, example in enumerate(examples) if i not in chosen]
    return kept, [example for i, example in enumerate(examples) if i in chosen]


def encode_examples(packer, examples, source):
    """Pack examples into encoder inputs; over-long ones are truncated, with one line that counts them."""
    tokenizer = packer.tokenizer
    first = [e.text_a for e in examples]
    second = [e.text_b for e in examples] if examples[0].text_b is not None else None
    lengths = np.array([len(t) for t in _token_lists(tokenizer, first)]) + packer.special_tokens(second is not None)
    if second is not None:
        lengths += np.array([len(t) for t in _token_lists(tokenizer, second)])
    over = int(np.sum(lengths > packer.sequence_length))
    if over:
        # A report, not a warning: truncating long inputs is the expected, documented behaviour.
        logger.warning(
            f"{source}: {over} of {len(examples)} examples are longer than sequence_length "
            f"{packer.sequence_length} tokens and were truncated."
        )
    features = [
        packer(first[i : i + 512], None if second is None else second[i : i + 512]) for i in range(0, len(first), 512)
    ]
    return {key: np.concatenate([f[key] for f in features]) for key in features[0]}


def _token_lists(tokenizer, texts):
    import tensorflow as tf

    result = tokenizer(tf.constant(texts))
    return result.to_list() if hasattr(result, "to_list") else result

"""Multiple-choice examples: a context and its candidate continuations, one of them right.

`next_sentence_choices` builds a SWAG-style set from documents (lists of sentences, such as the
Wikipedia excerpt's articles): each context is a sentence, the right choice the sentence that
follows it, the distractors other sentences of the same article (so topic words do not give the
answer away). `encode_choices` packs them for `bertlayers.models.MultipleChoice`: every
(context, choice) pair as one sentence pair, or the context and each choice alone.
"""

import dataclasses
import json

import numpy as np

from bertlayers.utils.text_files import json_value, numbered_lines


@dataclasses.dataclass(frozen=True)
class ChoiceExample:
    context: str
    choices: tuple
    label: int  # index of the right choice


def next_sentence_choices(documents, num_choices=4, seed=0, min_words=5):
    """Every consecutive pair of sentences of at least `min_words` words in an article with enough
    other sentences: the first as context, the second among `num_choices - 1` distractors drawn from
    the rest of that article, in a random order (fixed by `seed`)."""
    if num_choices < 2:
        raise ValueError(f"num_choices must be at least 2, got {num_choices}.")
    rng = np.random.default_rng(seed)
    examples = []
    for sentences in documents:
        usable = [s for s in sentences if len(s.split()) >= min_words]
        for i in range(len(usable) - 1):
            others = [s for j, s in enumerate(usable) if j not in (i, i + 1) and s != usable[i + 1]]
            if len(others) < num_choices - 1:
                continue
            distractors = [others[k] for k in rng.choice(len(others), num_choices - 1, replace=False)]
            label = int(rng.integers(num_choices))
            choices = distractors[:label] + [usable[i + 1]] + distractors[label:]
            examples.append(ChoiceExample(usable[i], tuple(choices), label))
    return examples


def write_choices(path, examples):
    """JSON lines: {"context", "choices", "label"} (atomically)."""
    from bertlayers.utils import atomic_files

    lines = "".join(
        json.dumps({"context": e.context, "choices": list(e.choices), "label": e.label}) + "\n" for e in examples
    )
    atomic_files.write_text(path, lines)


def read_choices(path):
    """The examples of a JSON lines file; a line that is not one names its place."""
    examples, count = [], None
    for number, line in numbered_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json_value(line, where)
            context, choices, label = record["context"], record["choices"], record["label"]
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise ValueError(
                f'{where}: expected {{"context": str, "choices": [str, ...], "label": int}} ({error}).'
            ) from None
        if not isinstance(context, str) or not context.strip():
            raise ValueError(f"{where}: context must be a non-empty string, got {context!r}.")
        if not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, str) for c in choices):
            raise ValueError(f"{where}: choices must be a list of at least two strings.")
        empty = [i for i, choice in enumerate(choices) if not choice.strip()]
        if empty:
            raise ValueError(f"{where}: choice {empty[0]} is empty; every choice needs text.")
        if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < len(choices):
            raise ValueError(f"{where}: label must index the choices (0 to {len(choices) - 1}), got {label!r}.")
        if count is not None and len(choices) != count:
            raise ValueError(
                f"{where}: {len(choices)} choices where the lines before have {count}; one number per file."
            )
        count = len(choices)
        examples.append(ChoiceExample(context, tuple(choices), label))
    if not examples:
        raise ValueError(f"{path} holds no examples.")
    return examples


def encode_choices(packer, examples, scorer="cross"):
    """Encoder inputs `[N, rows, seq]` for `MultipleChoice(scorer=scorer)` and the labels `[N]`:
    for "cross" each choice packed after its context as a sentence pair (rows = choices), for
    "similarity" the context alone, then each choice alone (rows = 1 + choices)."""
    from bertlayers.tokenizers.in_graph_tokenizer import pack_in_chunks

    if scorer == "similarity":
        texts = [text for e in examples for text in (e.context, *e.choices)]
        packed, rows = pack_in_chunks(packer, texts), 1 + len(examples[0].choices)
    elif scorer == "cross":
        first = [e.context for e in examples for _ in e.choices]
        second = [c for e in examples for c in e.choices]
        packed, rows = pack_in_chunks(packer, first, second), len(examples[0].choices)
    else:
        raise ValueError(f'scorer must be "cross" or "similarity", got {scorer!r}.')
    inputs = {key: value.reshape(len(examples), rows, -1) for key, value in packed.items()}
    return inputs, np.array([e.label for e in examples], "int32")

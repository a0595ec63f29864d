"""What the text-in task models take: lists of strings (or of words), checked before any work."""

import dataclasses
from typing import Any

from bertlayers.training.task_fitting import fit_settings


def text_list(values: Any, what: str, words: bool = False) -> list:
    """`values` as a list of strings (with `words`, each a string or a list of word strings);
    None, a lone string or an item of another type is a TypeError naming `what` (and the item)."""
    kind = "strings (or lists of words)" if words else "strings"
    if values is None or isinstance(values, (str, bytes, dict)):
        raise TypeError(f"{what} must be a list of {kind}, got {type(values).__name__}.")
    try:
        values = list(values)
    except TypeError:
        raise TypeError(f"{what} must be a list of {kind}, got {type(values).__name__}.") from None
    for index, value in enumerate(values):
        ok = isinstance(value, str) or (
            words and isinstance(value, (list, tuple)) and all(isinstance(word, str) for word in value)
        )
        if not ok:
            raise TypeError(f"{what}[{index}] is a {type(value).__name__} ({value!r:.40}), not one of {kind}.")
    return values


def examples_given(values: list, what: str) -> list:
    """`values`, or a ValueError where there is none to train on."""
    if not values:
        raise ValueError(f"fit needs examples: {what} is empty.")
    return values


def recorded_tokenizer_of(model, what: str):
    """The tokenizer recorded on `model` (a task's Keras model), or a ValueError saying how
    `what` (the task, in words) gets one."""
    from bertlayers.convert.model_files import recorded_tokenizer

    tokenizer = recorded_tokenizer(model)
    if tokenizer is None:
        raise ValueError(
            f"The {what} has no tokenizer recorded: load it with from_checkpoint or load, or record the one it "
            "reads (bertlayers.convert.record_tokenizer)."
        )
    return tokenizer


def checked_prompts(prompts: dict | None, default_prompt_name: str | None) -> dict:
    """{name: prompt} as given (None: none), the default among them."""
    prompts = dict(prompts or {})
    if default_prompt_name is not None and default_prompt_name not in prompts:
        raise ValueError(f"default_prompt_name {default_prompt_name!r} is not among the prompts {sorted(prompts)}.")
    return prompts


def chosen_prompt(prompts: dict, default_prompt_name: str | None, prompt_name: str | None, prompt: str | None) -> str:
    """The prompt an `encode` call asks for: `prompt` itself, or the one named `prompt_name`, else
    the default prompt, else none ("")."""
    if prompt is not None and prompt_name is not None:
        raise ValueError("Give prompt or prompt_name, not both.")
    if prompt is not None:
        return prompt
    name = prompt_name if prompt_name is not None else default_prompt_name
    if name is not None and name not in prompts:
        raise ValueError(f"prompt_name {name!r} is not among the prompts {sorted(prompts) or '(none)'}.")
    return prompts.get(name, "") if name is not None else ""


def in_batch_pairs(queries: Any, documents: Any, settings: dict) -> tuple:
    """(queries, documents, `FitSettings`) for in-batch negatives training (sparse and multi-vector
    `fit`): as many documents as queries, a full batch of them at least, batches at the full length
    (queries and documents are two inputs of one example; length batching would cut one's padding)."""
    queries, documents = text_list(queries, "queries"), text_list(documents, "documents")
    if len(queries) != len(documents):
        raise ValueError(f"{len(queries)} queries for {len(documents)} documents: give one document a query.")
    settings = fit_settings(settings, epochs=1, batch_size=16, learning_rate=2e-5)
    settings = dataclasses.replace(settings, pad_to_sequence_length=True)
    if len(examples_given(queries, "queries")) < settings.batch_size:
        raise ValueError(
            f"{len(queries)} pairs for batches of {settings.batch_size}: in-batch negatives need a full batch."
        )
    return queries, documents, settings

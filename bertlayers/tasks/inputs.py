"""What the text-in task models take: lists of strings (or of words), checked before any work."""

from typing import Any


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

"""Typed, range-checked settings: one place that turns a bad value into an error naming it."""

import dataclasses
import math
from typing import Optional


@dataclasses.dataclass(frozen=True)
class Range:
    """The values a numeric setting accepts: a type and optional bounds (open or closed).

    `Range(float, 0, 1, low_open=True)` is (0, 1]; NaN and infinities never pass.
    """

    kind: type
    low: Optional[float] = None
    high: Optional[float] = None
    low_open: bool = False
    high_open: bool = False

    def describe(self):
        """The range in words, for error messages and `--help` (e.g. "an int with 0 < value")."""
        if self.low is None and self.high is None:
            return f"a finite {self.kind.__name__}"
        article = "an" if self.kind.__name__[0] in "aeiou" else "a"
        left = "" if self.low is None else f"{self.low} <{'' if self.low_open else '='} "
        right = "" if self.high is None else f" <{'' if self.high_open else '='} {self.high}"
        return f"{article} {self.kind.__name__} with {left}value{right}"

    def check(self, name, value):
        """`value` converted to `kind` (from a string too), or a ValueError naming `name`."""
        try:
            if self.kind is int and isinstance(value, float) and not value.is_integer():
                raise ValueError
            if self.kind is int and isinstance(value, str):
                value = int(value.strip())
            typed = self.kind(value)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{name} must be {self.describe()}, got {value!r}.") from None
        if isinstance(value, bool) and self.kind is not bool:
            raise ValueError(f"{name} must be {self.describe()}, got {value!r}.")
        bad = not math.isfinite(typed)
        if self.low is not None:
            bad = bad or typed < self.low or (self.low_open and typed == self.low)
        if self.high is not None:
            bad = bad or typed > self.high or (self.high_open and typed == self.high)
        if bad:
            raise ValueError(f"{name} must be {self.describe()}, got {value!r}.")
        return typed


@dataclasses.dataclass(frozen=True)
class Choice:
    """The values a named setting accepts: one of a few strings (`Range`'s interface)."""

    values: tuple
    kind: type = str

    def describe(self):
        """The values in words, for error messages and `--help` ("one of gdes, es")."""
        return "one of " + ", ".join(self.values)

    def check(self, name, value):
        """`value` if it is one of the values (surrounding spaces ignored), or a ValueError naming `name`."""
        if not isinstance(value, str) or value.strip() not in self.values:
            raise ValueError(f"{name} must be {self.describe()}, got {value!r}.")
        return value.strip()


@dataclasses.dataclass(frozen=True)
class Boolean:
    """A yes/no setting (`Range`'s interface): a bool, or true/false, yes/no, 1/0 as text."""

    kind: type = bool
    TRUE = ("true", "yes", "1")
    FALSE = ("false", "no", "0")

    def describe(self):
        """The values in words, for error messages and `--help`."""
        return "true or false"

    def check(self, name, value):
        """`value` as a bool, or a ValueError naming `name`."""
        if isinstance(value, bool):
            return value
        text = value.strip().lower() if isinstance(value, str) else None
        if text in self.TRUE or text in self.FALSE:
            return text in self.TRUE
        raise ValueError(f"{name} must be {self.describe()}, got {value!r}.")


BOOLEAN = Boolean()
POSITIVE_INT = Range(int, 1)
NON_NEGATIVE_INT = Range(int, 0)
POSITIVE_FLOAT = Range(float, 0, low_open=True)
NON_NEGATIVE_FLOAT = Range(float, 0)
PROBABILITY = Range(float, 0, 1)
DROPOUT = Range(float, 0, 1, high_open=True)


def flag(allowed):
    """An argparse `type=` that converts and range-checks a flag's value: a bad one ends the
    script with argparse's one-line usage error (status 2) naming the flag."""
    import argparse

    def convert(text):
        try:
            return allowed.check("the value", text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error).replace("the value must be", "must be")) from None

    convert.__name__ = allowed.kind.__name__  # what argparse names in "invalid int value"
    return convert


def not_found(path: str, what: str) -> FileNotFoundError:
    """The error for a `path` that does not exist, `what` saying what was looked for."""
    return FileNotFoundError(f"No {what} at {path}.")

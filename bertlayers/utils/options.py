"""One way to declare a setting: a dataclass field that carries its help text, its range or
choices, and becomes a command-line flag.

    @dataclasses.dataclass
    class RunConfig:
        batch_size: int = option(32, "examples per step", POSITIVE_INT)
        precision: str = option("float32", "compute dtype policy", choices=PRECISIONS)

        def __post_init__(self):
            check_options(self)       # each field converted and checked; an error names it

    add_flags(parser, RunConfig)      # --batch_size, --precision, with their help, checked by argparse
    RunConfig(**options_from_flags(RunConfig, args))
"""

import argparse
import dataclasses
import typing

from bertlayers.utils.validation import flag as checked_type


def option(default=dataclasses.MISSING, help="", range=None, choices=None, metavar=None, flag=True):
    """A dataclass field with its help text, its `Range` (values checked and converted), its
    `choices` (a sequence, or a function giving one when checked: registries fill later) and
    whether it is a command-line flag (`add_flags`)."""
    metadata = {"help": help, "range": range, "choices": choices, "metavar": metavar, "flag": flag}
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _choices(field):
    choices = field.metadata.get("choices")
    return list(choices()) if callable(choices) else choices


def field_kind(field):
    """A field's type, `Optional[X]` read as X."""
    kind = field.type
    if typing.get_origin(kind) is typing.Union:
        kind = next(arg for arg in typing.get_args(kind) if arg is not type(None))
    return kind


def check_options(config, prefix=""):
    """Convert and check, in place, every field of dataclass `config` declared with `option`
    (None passes for an optional field); a ValueError names the field (`prefix` + name)."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if value is None:
            continue
        allowed = field.metadata.get("range")
        if allowed is not None:
            object.__setattr__(config, field.name, allowed.check(prefix + field.name, value))
        choices = _choices(field)
        if choices is not None and value not in choices:
            raise ValueError(f"{prefix}{field.name} must be one of {', '.join(map(str, choices))}, got {value!r}.")


def add_flags(parser, config_class, defaults=None, skip=()):
    """A `--name` flag for every `option` field of `config_class` (but `skip`): its help, its
    type and range checked by argparse, its choices; bools as `--name/--no-name`. `defaults`
    ({name: value}) change a field's default for this parser. Returns the flags' actions by name."""
    defaults = defaults or {}
    actions = {}
    for field in dataclasses.fields(config_class):
        if field.name in skip or not field.metadata.get("flag", False):
            continue
        default = defaults.get(field.name, field.default if field.default is not dataclasses.MISSING else None)
        arguments = {"default": default, "help": field.metadata.get("help", "").replace("%", "%%")}
        kind = field_kind(field)
        if kind is bool:
            arguments["action"] = argparse.BooleanOptionalAction
        else:
            allowed = field.metadata.get("range")
            arguments["type"] = checked_type(allowed) if allowed is not None else kind
            if field.metadata.get("metavar"):
                arguments["metavar"] = field.metadata["metavar"]
            if _choices(field) is not None:
                arguments["choices"] = _choices(field)
        if field.default is dataclasses.MISSING and field.name not in defaults:
            arguments["required"] = True
            del arguments["default"]
        actions[field.name] = parser.add_argument(f"--{field.name}", **arguments)
    return actions


def options_from_flags(config_class, args):
    """{field: value} of parsed `args` for the fields of `config_class` that `args` holds."""
    values = vars(args) if isinstance(args, argparse.Namespace) else dict(args)
    return {field.name: values[field.name] for field in dataclasses.fields(config_class) if field.name in values}


def help_of(config_class, name):
    """The help text of field `name`."""
    return next(field.metadata.get("help", "") for field in dataclasses.fields(config_class) if field.name == name)


def options_with(options_class, options, settings, caller):
    """`options` (default: `options_class()`) with `settings` ({field: value}) applied, checked;
    a TypeError names a setting `options_class` has no field for."""
    options = options if options is not None else options_class()
    unknown = sorted(set(settings) - {field.name for field in dataclasses.fields(options_class)})
    if unknown:
        raise TypeError(
            f"{caller} got unknown settings {', '.join(unknown)} ({options_class.__name__}'s fields are its settings)."
        )
    return dataclasses.replace(options, **settings) if settings else options

"""The recipe registry: what `examples/pretrain.py --recipe NAME` can run.

A recipe ties a family's pretrainer to its data objective. Each family registers its
recipes in its own module under `bertlayers/families/`; nothing else needs to change. The
registry is filled by importing `bertlayers.families`, which importing this module does first.
"""

import dataclasses
from collections.abc import Callable
from typing import Optional

from bertlayers.utils.validation import Range

RECIPES = {}


@dataclasses.dataclass(frozen=True)
class Option:
    """One recipe setting: its default, the values it accepts and what it means."""

    default: object
    allowed: Range
    help: str = ""

    def __post_init__(self):
        self.allowed.check("the default", self.default)

    def describe(self):
        default = str(self.default).lower() if isinstance(self.default, bool) else self.default
        return f"{default} ({self.allowed.describe()}{'; ' + self.help if self.help else ''})"


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage of a recipe trained in stages (ELECTRA's two-stage training): its own model,
    optimizer and learning-rate schedule over an equal share of the run's steps, in a folder
    of its own; the batches go on from where the stage before stopped.

    Attributes:
      name: the stage's folder under the run's.
      build: `(encoder_config, dtype, options, previous) -> keras.Model`: the stage's model;
        `previous` is the stage before's trained model (None for the first).
      loss_key, report: as `Recipe`'s, for this stage's model.
    """

    name: str
    build: Callable
    loss_key: str = "mlm_loss"
    report: tuple = ()


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One pretraining recipe.

    Attributes:
      name: what `--recipe` takes.
      description: one line for `--help`.
      objective: its `bertlayers.pretraining_data.objectives.DataObjective`, or a function of the
        resolved options returning one (when an option shapes the data).
      build_pretrainer: `(encoder_config, dtype, options) -> keras.Model`, the pretrainer
        over a randomly initialized encoder; the model has an `.encoder` (what fine-tuning
        starts from) and compiles with its own default losses.
      loss_key: the logged loss that measures learning (reported before, during and after).
      encoder_config: `(EncoderConfig) -> EncoderConfig`, what the recipe changes in the
        preset's architecture (ALBERT's factorization, LTR's causal attention); None keeps it.
      options: the recipe's own settings, {name: `Option`} (`--option name=value`).
      report: further logged metrics the run summary reports.
      continues_checkpoint: whether the recipe can start from a checkpoint's encoder and MLM head
        (`--init`): its pretrainer is one encoder with a masked-LM head, of the checkpoint's
        architecture.
      stages: `(options) -> tuple of Stage`, or None: under options that train in stages, the
        stages (None, or an empty tuple: one stage, `build_pretrainer`).
    """

    name: str
    description: str
    objective: object
    build_pretrainer: Callable
    loss_key: str = "mlm_loss"
    encoder_config: Optional[Callable] = None
    options: dict = dataclasses.field(default_factory=dict)
    report: tuple = ()
    continues_checkpoint: bool = True
    stages: Optional[Callable] = None

    def stages_for(self, options):
        """The stages the run trains under the resolved `options`: the recipe's own, or one
        stage building `build_pretrainer`'s model."""
        stages = self.stages(options) if self.stages is not None else ()
        if stages:
            return tuple(stages)
        return (
            Stage(
                "pretraining",
                lambda config, dtype, options, previous: self.build_pretrainer(config, dtype, options),
                self.loss_key,
                self.report,
            ),
        )

    def objective_for(self, options):
        """The data objective under the resolved `options`."""
        return self.objective(options) if callable(self.objective) else self.objective

    def resolved_options(self, given):
        """The recipe's option values with `given` ({name: value or string}) applied, typed and
        range-checked (a ValueError names the option and what it accepts)."""
        given = dict(given or {})
        unknown = sorted(set(given) - set(self.options))
        if unknown:
            known = ", ".join(self.options) or "none"
            raise ValueError(f"Recipe {self.name!r} has no option {unknown}; its options: {known}.")
        resolved = {name: option.default for name, option in self.options.items()}
        for name, value in given.items():
            resolved[name] = self.options[name].allowed.check(f"Option {name} of recipe {self.name!r}", value)
        return resolved


def register_recipe(recipe):
    """Make `recipe` available by name (a family module calls this at import)."""
    RECIPES[recipe.name] = recipe
    return recipe


def get_recipe(name):
    """The registered recipe `name`, or a ValueError listing the known ones."""
    if name not in RECIPES:
        raise ValueError(f"Unknown recipe {name!r}; known: {', '.join(RECIPES)}.")
    return RECIPES[name]


def recipe_names():
    """The registered recipes' names, in registration order."""
    return list(RECIPES)

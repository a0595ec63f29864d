"""The recipe registry: what `examples/pretrain.py --recipe NAME` can run.

A recipe ties a family's pretrainer to its data objective. Each family registers its
recipes in its own module under `bertlayers/families/`; nothing else needs to change.
"""

import dataclasses
from typing import Callable, Optional

RECIPES = {}


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One pretraining recipe.

    Attributes:
      name: what `--recipe` takes.
      description: one line for `--help`.
      objective: its `bertlayers.data.pretraining_data.DataObjective`, or a function of the
        resolved options returning one (when an option shapes the data).
      build_pretrainer: `(encoder_config, dtype, options) -> keras.Model`, the pretrainer
        over a randomly initialized encoder; the model has an `.encoder` (what fine-tuning
        starts from) and compiles with its own default losses.
      loss_key: the logged loss that measures learning (reported before, during and after).
      encoder_config: `(EncoderConfig) -> EncoderConfig`, what the recipe changes in the
        preset's architecture (ALBERT's factorization, LTR's causal attention); None keeps it.
      options: the recipe's own settings and their defaults (`--option name=value`).
      report: further logged metrics the run summary reports.
    """

    name: str
    description: str
    objective: object
    build_pretrainer: Callable
    loss_key: str = "mlm_loss"
    encoder_config: Optional[Callable] = None
    options: dict = dataclasses.field(default_factory=dict)
    report: tuple = ()

    def objective_for(self, options):
        """The data objective under the resolved `options`."""
        return self.objective(options) if callable(self.objective) else self.objective

    def resolved_options(self, given):
        """The recipe's options with `given` ({name: value or string}) applied and typed."""
        given = dict(given or {})
        unknown = sorted(set(given) - set(self.options))
        if unknown:
            known = ", ".join(self.options) or "none"
            raise ValueError(f"Recipe {self.name!r} has no option {unknown}; its options: {known}.")
        resolved = dict(self.options)
        for name, value in given.items():
            kind = type(self.options[name])
            try:
                resolved[name] = kind(value)
            except (TypeError, ValueError):
                raise ValueError(f"Option {name} of recipe {self.name!r} must be a {kind.__name__}, got {value!r}.") from None
        return resolved


def register_recipe(recipe):
    """Make `recipe` available by name (a family module calls this at import)."""
    RECIPES[recipe.name] = recipe
    return recipe


def get_recipe(name):
    """The registered recipe `name`, or a ValueError listing the known ones."""
    import bertlayers.families  # noqa: F401  (the families register their recipes on import)

    if name not in RECIPES:
        raise ValueError(f"Unknown recipe {name!r}; known: {', '.join(RECIPES)}.")
    return RECIPES[name]


def recipe_names():
    import bertlayers.families  # noqa: F401

    return list(RECIPES)

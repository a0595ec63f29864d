"""Assign checkpoint arrays to model variables, reporting every disagreement at once."""

import re
import warnings

import numpy as np


class CheckpointMismatchError(ValueError):
    """A checkpoint does not fit the model: missing tensors or wrong shapes (all listed)."""


class Probe:
    """While active (`with Probe(tensors) as probe:`), a loader reads `tensors` instead of the
    folder's model.safetensors, and its `WeightMap.apply` assigns nothing but records every
    (variable, checkpoint name, transform) pair in `probe.pairs`, every variable the checkpoint's
    class has no tensor for and the loader fixes to a value (an LM head's absent bias: zeros) in
    `probe.fixed` as (variable, value, what it is), and the base model's prefix `start_loading` was
    given in `probe.prefix`: the loader's map, read backwards to save a model in the checkpoint's
    layout (`bertlayers.convert.saving`)."""

    active = None

    def __init__(self, tensors):
        self.tensors = tensors
        self.pairs = []
        self.shapes = {}
        self.fixed = []
        self.prefix = None

    def __enter__(self):
        Probe.active = self
        return self

    def __exit__(self, *error):
        Probe.active = None


class WeightMap:
    """Collects (variable ← checkpoint tensor) pairs, then checks and assigns them together.

    Nothing is assigned unless every pair fits, so a failed load never leaves a model half
    converted.

    Args:
      tensors: mapping from checkpoint name to numpy array (`checkpoint_tensors.CheckpointTensors`
        reads each from its file at each lookup; every tensor is looked up twice, to check and
        to assign).
      source: a description of the checkpoint for messages (its path).
    """

    def __init__(self, tensors, source):
        self.tensors = tensors
        self.source = source
        self._pairs = []
        self.shapes = {}

    def add(self, variable, key, transform=None, shape=None):
        """Load `tensors[key]`, passed through `transform` (e.g. a transpose), into `variable`.
        `shape`: the checkpoint tensor's, where `transform` reshapes (what saving writes back)."""
        self._pairs.append((variable, key, transform))
        if shape is not None:  # -1: the rest of the variable's size
            size = int(np.prod(variable.shape))
            known = int(np.prod([d for d in shape if d != -1]))
            self.shapes[key] = tuple(int(d) if d != -1 else size // known for d in shape)

    def fix(self, variable, value, what):
        """Set `variable` to `value` now: the checkpoint's class has no tensor for it (`what` says
        which), so the model computes as that class only while it keeps the value; saving refuses
        a model whose variable has moved off it."""
        value = np.asarray(value, "float32")
        if Probe.active is not None:
            Probe.active.fixed.append((variable, value, what))
        else:
            variable.assign(value)

    def apply(self, ignore=()):
        """Check every pair, assign all of them, and return the unexpected checkpoint names.

        Args:
          ignore: regular expressions of checkpoint names that are expected to go unused
            (buffers, heads the model lacks); other unused names are warned about.

        Raises:
          CheckpointMismatchError: listing the missing tensors and the shape mismatches.
        """
        if Probe.active is not None:
            Probe.active.pairs.extend(self._pairs)
            Probe.active.shapes.update(self.shapes)
            return []
        missing, mismatched, not_finite = [], [], []
        for variable, key, transform in self._pairs:
            if key not in self.tensors:
                missing.append(key)
                continue
            array = np.asarray(self.tensors[key])
            try:
                value = _transformed(array, transform)
            except ValueError:
                value = None
            if value is None or tuple(value.shape) != tuple(variable.shape):
                mismatched.append(
                    f"{key}: checkpoint shape {tuple(array.shape)}, model variable "
                    f"{variable.path} has shape {tuple(variable.shape)}"
                )
                continue
            if np.issubdtype(value.dtype, np.floating) and not np.isfinite(value).all():
                not_finite.append(f"{key}: {describe_non_finite(value)}")
        if not_finite:
            raise CheckpointMismatchError(
                f"Checkpoint {self.source} holds values that are not finite (NaN or Inf), which would make every "
                f"output NaN; the file is corrupt or was saved from a diverged run:\n  " + "\n  ".join(not_finite)
            )
        if missing or mismatched:
            lines = [f"Checkpoint {self.source} does not match the model config."]
            if mismatched:
                lines.append(f"Shape mismatches ({len(mismatched)}):")
                lines += [f"  {line}" for line in mismatched]
            if missing:
                lines.append(f"Missing from the checkpoint ({len(missing)}):")
                lines += [f"  {key}" for key in missing]
            raise CheckpointMismatchError("\n".join(lines))

        used = {key for _, key, _ in self._pairs}
        patterns = [re.compile(pattern) for pattern in ignore]
        unexpected = sorted(key for key in self.tensors if key not in used and not any(p.search(key) for p in patterns))
        if unexpected:
            warnings.warn(
                f"{len(unexpected)} tensors of {self.source} are not used by the model: "
                + ", ".join(unexpected[:20])
                + (" ..." if len(unexpected) > 20 else ""),
                stacklevel=3,
            )
        # Each tensor read (`tensors` reads from the file) and transformed again as it is assigned:
        # keeping every checked value until all were checked held a second copy of the checkpoint.
        for variable, key, transform in self._pairs:
            variable.assign(_transformed(np.asarray(self.tensors[key]), transform).astype(variable.dtype, copy=False))
        return unexpected


def _transformed(array, transform):
    """A checkpoint array as its variable takes it (`transform`: a transpose, a reshape, a slice)."""
    return transform(array) if transform else array


def describe_non_finite(array):
    """'3 NaN, 1 Inf of 4096 values' for a float array."""
    return f"{int(np.isnan(array).sum())} NaN, {int(np.isinf(array).sum())} Inf of {array.size} values"

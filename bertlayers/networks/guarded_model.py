"""A `keras.Model` that a refused call leaves as it was.

Keras's training loops on JAX are stateless: before the first step `fit`, `evaluate` and `predict`
move every variable's value into the step's state and clear the variable (to hold one copy in
memory), and put the values back when the loop ends. A step that raises (a batch of the wrong
rank, float ids refused by a layer's check while the step is traced) never gets there: every
variable is left empty, and every later call, `get_weights` and `save` fail with "'NoneType'
object is not callable", the trained weights gone (a plain `keras.Model` behaves the same).

Two guards keep a model usable. The batch is checked on the host before Keras sees it (dtype,
rank and shape against the model's `keras.Input`s, then the values where the model knows their
limits, `check_input_values`): inside a compiled step values cannot be checked, and an id of -1
would read the last embedding row there without a word. And any call that still raises has the
loop's latest state (or, before its first step, the values it cleared) put back before the
error goes on. `save` writes its file atomically, so a failing save never replaces a good file.
"""

import os
import weakref

import keras
import numpy as np

from bertlayers import backend
from bertlayers.layers.input_checks import check_encoder_values
from bertlayers.utils.atomic_files import save_model
from bertlayers.utils.cli import plain_progress


def _is_dataset(data):
    return type(data).__name__.endswith("Dataset") and hasattr(data, "element_spec")


def _features(data):
    """The model's inputs in what `fit`/`predict` take: a dict as it is, a Dataset's element
    spec (its first item when it yields `(x, y[, w])`), else None (generators, PyDatasets)."""
    if _is_dataset(data):
        data = data.element_spec
        if isinstance(data, tuple):
            data = data[0]
    return data if isinstance(data, dict) else None


def _is_integer(dtype):
    try:
        return np.dtype(dtype).kind in "iub"  # NumPy's and JAX's dtypes, quickly (checked on every call)
    except TypeError:
        dtype = keras.backend.standardize_dtype(dtype)
        return "int" in dtype or dtype == "bool"


class GuardedModel:
    """The mixin (before `keras.Model` among the bases) of every model bertlayers builds: inputs
    checked before Keras's stateful machinery sees them, the state kept through a refused call,
    `save` atomic. (Not itself a `keras.Model`: Keras rewrites the bases of a functional model's
    classes to `Functional`, which would turn a subclassed model on the same base functional too.)

    Subclasses name the limits of the values they take in `input_value_limits` (checked on a
    dict of NumPy arrays by `check_input_values`); the dtype, rank and fixed dimensions of every
    `keras.Input` are checked here for all.
    """

    def input_value_limits(self) -> list:
        """The `EncoderInputLimits` of the encoders this model feeds its inputs to, which
        `check_input_values` checks (and a compiled predictor checks inside its function); none
        by default."""
        return []

    def check_input_values(self, inputs):
        """Raise a ValueError naming the input and value if `inputs` ({name: NumPy array}, as
        fed) holds a value this model cannot take: outside its `input_value_limits`."""
        for limit in self.input_value_limits():
            check_encoder_values(inputs, *limit)

    def check_inputs(self, data):
        """Check what `fit`, `evaluate` or `predict` was given (a dict of arrays, or a
        `tf.data.Dataset` whose element spec is checked) before it reaches the model."""
        features = _features(data)
        if features is None:
            return
        self.check_input_structure(features)
        if not _is_dataset(data):
            self.check_known_values(features)

    def check_input_structure(self, features):
        """Each fed input of `features` against its `keras.Input` (see `check_input_structure`)."""
        check_input_structure(self._input_specs(), features)

    def _input_specs(self):
        return input_specs(self)

    def check_known_values(self, features):
        """`check_input_values` on the inputs whose values are at hand (NumPy, eager tensors)."""
        specs = self._input_specs()
        values = {name: backend.known_values(value) for name, value in features.items() if name in specs}
        self.check_input_values({name: value for name, value in values.items() if value is not None})

    # `training` and `mask` named, as in the functional model's own `call`: Keras reads the
    # signature to decide whether `fit` passes `training=True` (without it, dropout stays off).
    def call(self, inputs, training=None, mask=None, **kwargs):
        if isinstance(inputs, dict) and self not in _BUILDING:
            # An eager call checks values too: its layers may not be the ones whose calls check them
            # (XLNet's pretrainer runs its encoder's streams itself).
            self.check_input_structure(inputs)
            self.check_known_values(inputs)
        return super().call(inputs, training=training, mask=mask, **kwargs)

    # --- Keras's entry points, each checked and kept whole ---
    def _guarded(self, method, x, *args, **kwargs):
        self.check_inputs(x)
        if method.__name__ in ("fit", "train_on_batch"):
            backend.build_optimizer_ahead(self)
        if "verbose" in kwargs or method.__name__ in ("fit", "evaluate", "predict"):
            kwargs["verbose"] = plain_progress(kwargs.get("verbose", "auto"))
        with kept_state(self):
            return method(x, *args, **kwargs)

    def fit(self, x=None, y=None, *args, validation_data=None, **kwargs):
        if validation_data is not None:
            self.check_inputs(validation_data[0] if isinstance(validation_data, tuple) else validation_data)
        return self._guarded(super().fit, x, y, *args, validation_data=validation_data, **kwargs)

    def evaluate(self, x=None, *args, **kwargs):
        return self._guarded(super().evaluate, x, *args, **kwargs)

    def predict(self, x, *args, **kwargs):
        return self._guarded(super().predict, x, *args, **kwargs)

    def train_on_batch(self, x, *args, **kwargs):
        return self._guarded(super().train_on_batch, x, *args, **kwargs)

    def test_on_batch(self, x, *args, **kwargs):
        return self._guarded(super().test_on_batch, x, *args, **kwargs)

    def predict_on_batch(self, x):
        return self._guarded(super().predict_on_batch, x)

    def _symbolic_build(self, *args, **kwargs):
        # Keras builds an unbuilt model on its first batch, under a tf.distribute strategy on that
        # batch's mean across replicas (float64 for integer ids): not the user's values, which
        # `check_inputs` saw before.
        _BUILDING.add(self)
        try:
            return super()._symbolic_build(*args, **kwargs)
        finally:
            _BUILDING.discard(self)

    def _purge_model_variables(self, *args, **kwargs):
        # Keras's JAX loops call this to clear the variables whose values they move into a step's
        # state; what they held is kept here until the loop ends (see `kept_state`).
        candidates = list(self.variables) + list(getattr(self, "metrics_variables", []))
        optimizer = getattr(self, "optimizer", None)
        if optimizer is not None and getattr(optimizer, "built", False):
            candidates += list(optimizer.variables)
        _CLEARED.setdefault(self, []).extend((v, v._value) for v in candidates if v._value is not None)
        return super()._purge_model_variables(*args, **kwargs)

    def save(self, filepath, *args, **kwargs):
        """`keras.Model.save`, written atomically when `filepath` is a path: a save that fails
        (a full disk, a refused model) leaves the file that was there."""
        if isinstance(filepath, (str, os.PathLike)) and str(filepath).endswith(".keras") and not args and not kwargs:
            return save_model(self, os.fspath(filepath))
        return super().save(filepath, *args, **kwargs)


def input_specs(model):
    """{name: keras.Input} of a functional model (empty for a subclassed one)."""
    return {tensor.name: tensor for tensor in getattr(model, "inputs", None) or [] if hasattr(tensor, "name")}


def check_input_structure(specs, features):
    """Each fed input of `features` ({name: array, tensor or spec}) against its `keras.Input` in
    `specs`: integers where it takes integers (a functional model would cast 5.7 to 5), its rank
    (it would squeeze `[batch, seq, 1]` to `[batch, seq]`), its fixed dimensions; and no input the
    model lacks (Keras would feed the dict's values by their sorted names' order: a
    `masked_positions` given to a classifier would be read as its `padding_mask`)."""
    unknown = sorted(set(features) - set(specs)) if specs else []
    if unknown:
        raise ValueError(
            f"The model has no input named {', '.join(map(repr, unknown))}; it takes {', '.join(sorted(specs))}."
        )
    for name, value in features.items():
        spec = specs.get(name)
        if spec is None or not hasattr(value, "shape") or not hasattr(value, "dtype"):
            continue
        shape = tuple(value.shape)
        if _is_integer(spec.dtype) and not _is_integer(value.dtype):
            raise TypeError(
                f"{name} must be an integer tensor ({keras.backend.standardize_dtype(spec.dtype)}), "
                f"got dtype {keras.backend.standardize_dtype(value.dtype)}."
            )
        if len(shape) != len(spec.shape):
            raise ValueError(f"{name} must have rank {len(spec.shape)} ({_layout(spec)}), got shape {shape}.")
        for axis, (want, got) in enumerate(zip(spec.shape, shape)):
            if axis and want is not None and got is not None and want != got:
                raise ValueError(f"{name} must be {_layout(spec)}, got shape {shape}.")


def _layout(spec):
    """An input's shape as an error names it: `[batch, ?, 4]`."""
    return "[batch, " + ", ".join("?" if d is None else str(d) for d in spec.shape[1:]) + "]"


# Model -> [(variable, value)]: what Keras's JAX loop last cleared from the model's variables.
# (`fit` calls `evaluate` for its validation data: the depth of such nested calls per model.)
_CLEARED = weakref.WeakKeyDictionary()
_DEPTH = weakref.WeakKeyDictionary()
_BUILDING = weakref.WeakSet()  # models Keras is building on a batch of its own making


class kept_state:
    """Context manager: if the body raises, the model's variables hold values again (under JAX,
    the loop's latest state, else what the loop cleared from them)."""

    def __init__(self, model):
        self.model = model

    def __enter__(self):
        self.state_before = getattr(self.model, "_jax_state", None)
        _DEPTH[self.model] = _DEPTH.get(self.model, 0) + 1
        return self

    def __exit__(self, kind, error, traceback):
        model = self.model
        _DEPTH[model] -= 1
        if kind is None or not backend.restores_state_after_failed_step():
            if not _DEPTH[model]:  # the outermost call ended: the loop put every value back
                _CLEARED.pop(model, None)
            return False
        state = getattr(model, "_jax_state", None)
        if state and state is not self.state_before and not getattr(model, "_jax_state_synced", True):
            model.jax_state_sync()  # the state after the last step that ran
        model._jax_state = None
        model._jax_state_synced = True
        cleared = _CLEARED.pop(model, []) if not _DEPTH[model] else _CLEARED.get(model, [])
        for variable, value in cleared:
            if variable._value is None and value is not None and not _deleted(value):
                variable._value = value
        return False


def _deleted(array):
    """Whether a JAX array's buffer was donated to a step (and so freed)."""
    return bool(getattr(array, "is_deleted", lambda: False)())

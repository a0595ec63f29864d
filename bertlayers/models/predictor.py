"""A model's inference as one compiled function per input shape: NumPy in, NumPy out.

`model.predict_on_batch` pays Keras's per-call work each time: under JAX it gathers the model's
state, lays out the batch for a distribution and writes the state back, whatever the batch: on
an accelerator most of the time a BERT-base forward takes (benchmarks/README.md, "On
accelerators"). `compiled_predictor(model)` compiles the forward pass once per input
shape (`jax.jit` of `model.stateless_call`; under TensorFlow a `tf.function` that does not retrace
for new lengths) and hands it the weights as they are at each call, so it stays right after more
training. It works on any Keras model, ours or not.
"""

from collections.abc import Callable

import keras
import numpy as np

from bertlayers import backend as keras_backend
from bertlayers.layers.input_checks import values_within
from bertlayers.networks.guarded_model import GuardedModel, check_input_structure, input_specs
from bertlayers.startup import backend_name


def compiled_predictor(model: keras.Model) -> Callable:
    """`predict(inputs) -> outputs` for `model` in inference mode (dropout off), outputs as NumPy.

    `inputs` is what the model takes (a dict of `[batch, seq]` int arrays for our encoders); each new
    shape compiles once, so batches of a few fixed lengths (`bertlayers.tokenizers.padding`) keep it fast.
    Inputs are checked as `predict_on_batch` checks them: names, dtypes and shapes on the host the
    first time a shape is seen, values at every call (under JAX inside the compiled function, the
    host naming the problem only when there is one).
    """
    if not isinstance(model, keras.Model):
        raise TypeError(f"compiled_predictor needs a keras.Model, got {type(model).__name__}")
    guarded = isinstance(model, GuardedModel)
    backend = backend_name()
    if backend == "jax":
        run, limits, to_host = _jax_runner(model, guarded)
    elif backend == "tensorflow":
        import tensorflow as tf

        call = tf.function(lambda inputs: model(inputs, training=False), reduce_retracing=True)
        run, limits, to_host = (lambda inputs: (call(inputs), None)), None, np.asarray
    else:
        return model.predict_on_batch

    # Input names, shapes and dtypes that passed the host's checks: the structure checks depend on
    # nothing else, so a shape seen before is not checked again.
    checked_structures = set()

    def predict(inputs):
        # Checked before the compiled function runs or compiles: a bad shape would compile a new
        # function, and inside it a bad value cannot raise (an id of -1 would read the last
        # embedding row).
        structure = _structure(inputs)
        seen = structure is not None and structure in checked_structures
        if not seen:
            if guarded:
                model.check_inputs(inputs)  # names, dtypes, shapes and values
            elif isinstance(inputs, dict):
                check_input_structure(input_specs(model), inputs)
            if structure is not None:
                if len(checked_structures) > 256:  # a bound on memory for callers of ever-new shapes
                    checked_structures.clear()
                checked_structures.add(structure)
        elif guarded and not limits:
            model.check_known_values(inputs)
        outputs, within = run(inputs)
        if seen and within is not None and not to_host(within):
            model.check_known_values(inputs)  # raises, naming the input and the value
            raise ValueError("The inputs hold values outside the model's limits (its compiled check says so).")
        if isinstance(outputs, dict):
            return {name: to_host(value) for name, value in outputs.items()}
        return keras.tree.map_structure(to_host, outputs)

    return predict


def _jax_runner(model, guarded):
    """(run(inputs) -> (outputs, values within limits or None), the limits checked inside, to_host)
    for `model` under JAX: one `jax.jit` function of the variables' values and the inputs."""
    import jax

    to_host = np.asarray
    # A model whose value checks are its limits (not checks of its own) has them computed in
    # the compiled function: a few fused reductions there, where the host's NumPy checks cost
    # more than the rest of a small model's call (benchmarks/host_overhead.py).
    limits = model.input_value_limits() if guarded and _checks_by_limits(model) else None

    @jax.jit
    def forward(trainable, non_trainable, inputs):
        outputs, _ = model.stateless_call(trainable, non_trainable, inputs, training=False)
        return outputs, (values_within(inputs, limits) if limits and isinstance(inputs, dict) else None)

    # Across JAX processes (fixed once JAX has started, as it has for a built model), `inputs`
    # are this process's rows of each batch, and every process gets every row's outputs.
    if keras_backend.process_index_and_count()[1] > 1:
        place, to_host = keras_backend.global_batch, keras_backend.host_array
    else:
        place = lambda inputs: inputs  # noqa: E731

    # The trainable / non-trainable partition once, and again only when a variable's trainable
    # flag changed (a layer frozen since): Keras walks every layer for each property read
    # (benchmarks/host_overhead.py measures it). The values every call, so
    # weights trained since are the ones used.
    variables = model.variables
    partition = {}

    def run(inputs):
        flags = tuple(variable.trainable for variable in variables)
        if partition.get("flags") != flags:
            partition.update(flags=flags, trainable=model.trainable_variables, rest=model.non_trainable_variables)
        trainable = keras_backend.variable_values(partition["trainable"])
        non_trainable = keras_backend.variable_values(partition["rest"])
        return forward(trainable, non_trainable, place(inputs))

    return run, limits, to_host


def _checks_by_limits(model):
    """Whether `model` checks its values by its `input_value_limits` alone (no checks of its own)."""
    return type(model).check_input_values is GuardedModel.check_input_values


def _structure(inputs):
    """A dict of arrays' names, shapes and dtypes (hashable), or None for anything else."""
    if not isinstance(inputs, dict):
        return None
    try:
        return tuple((name, tuple(value.shape), value.dtype) for name, value in inputs.items())
    except (AttributeError, TypeError):
        return None

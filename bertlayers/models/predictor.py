"""A model's inference as one compiled function per input shape: NumPy in, NumPy out.

`model.predict_on_batch` pays Keras's per-call work each time: under JAX it gathers the model's
state, lays out the batch for a distribution and writes the state back, about 10 ms a call on an
H100 whatever the batch (benchmarks/README.md, "On accelerators"), which is most of the time a
BERT-base forward takes there. `compiled_predictor(model)` compiles the forward pass once per input
shape (`jax.jit` of `model.stateless_call`; under TensorFlow a `tf.function` that does not retrace
for new lengths) and hands it the weights as they are at each call, so it stays right after more
training. It works on any Keras model, ours or not.
"""

from collections.abc import Callable

import keras
import numpy as np

from bertlayers.networks.guarded_model import GuardedModel, check_input_structure, input_specs
from bertlayers.startup import backend_name


def compiled_predictor(model: keras.Model) -> Callable:
    """`predict(inputs) -> outputs` for `model` in inference mode (dropout off), outputs as NumPy.

    `inputs` is what the model takes (a dict of `[batch, seq]` int arrays for our encoders); each new
    shape compiles once, so batches of a few fixed lengths (`bertlayers.tokenizers.padding`) keep it fast.
    """
    if not isinstance(model, keras.Model):
        raise TypeError(f"compiled_predictor needs a keras.Model, got {type(model).__name__}")
    backend = backend_name()
    if backend == "jax":
        import jax

        @jax.jit
        def forward(trainable, non_trainable, inputs):
            outputs, _ = model.stateless_call(trainable, non_trainable, inputs, training=False)
            return outputs

        # The trainable / non-trainable partition once, and again only when a variable's trainable
        # flag changed (a layer frozen since): Keras walks every layer for each property read (~30 µs
        # a call on a 2-core AMD EPYC, benchmarks/host_overhead.py). The values every call, so
        # weights trained since are the ones used.
        variables = model.variables
        partition = {}

        def run(inputs):
            flags = tuple(variable.trainable for variable in variables)
            if partition.get("flags") != flags:
                partition.update(flags=flags, trainable=model.trainable_variables, rest=model.non_trainable_variables)
            trainable = [variable.value for variable in partition["trainable"]]
            non_trainable = [variable.value for variable in partition["rest"]]
            return forward(trainable, non_trainable, inputs)

    elif backend == "tensorflow":
        import tensorflow as tf

        run = tf.function(lambda inputs: model(inputs, training=False), reduce_retracing=True)
    else:
        return model.predict_on_batch

    def predict(inputs):
        # Checked on the host first: inside the compiled function values cannot be (an id of -1
        # would read the last embedding row there), and a bad shape would compile a new function.
        if isinstance(model, GuardedModel):
            model.check_inputs(inputs)
        elif isinstance(inputs, dict):
            check_input_structure(input_specs(model), inputs)
        return keras.tree.map_structure(np.asarray, run(inputs))

    return predict

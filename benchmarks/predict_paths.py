"""Where a Keras model's inference time goes under JAX: the call path or the model.

For the bertlayers and keras-hub BERT-base classifiers (bfloat16, sequence 128, batch 1 and 32;
`accelerator.py`'s models and batches) it times, in milliseconds per call (medians):

  predict_on_batch          Keras's own call (gathers and writes back the state each call)
  compiled_predictor        `bertlayers.models.compiled_predictor`: NumPy in and out
  jit_stateless_device_io   its compiled `stateless_call` with the inputs already on the device, outputs left there
  jit_queued_per_call       20 calls queued, one sync at the end: the device's own time per call

Needs JAX (a GPU machine: see accelerator.py's docstring), not TensorFlow.

    python benchmarks/predict_paths.py --output benchmarks/predict_paths_h100.json    # on the GPU machine
    python benchmarks/predict_paths.py --quick                                        # CPU smoke run
"""

import argparse
import json
import os
import statistics
import sys
import time

os.environ["KERAS_BACKEND"] = "jax"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from accelerator import REPO, keras_model, random_batch, sizes  # noqa: E402

sys.path.insert(0, REPO)


def milliseconds(function, inputs, calls=30):
    for _ in range(3):
        function(inputs)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        function(inputs)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def paths(library, quick):
    import jax
    import numpy as np

    from bertlayers.models import compiled_predictor

    model = keras_model(library, "infer", sizes("infer", quick)[0], 128)
    rng = np.random.default_rng(0)
    batches = [random_batch(rng, rows, 128) for rows in (1, 32)]
    compiled = jax.jit(
        lambda trainable, non_trainable, inputs: model.stateless_call(trainable, non_trainable, inputs, training=False)[
            0
        ]
    )

    def forward(inputs):  # the weights read at each call: predict_on_batch replaces their arrays
        return compiled(
            [v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables], inputs
        )

    def queued(inputs):
        for _ in range(20):
            outputs = forward(inputs)
        jax.block_until_ready(outputs)

    on_device = [jax.device_put(batch) for batch in batches]
    return {
        "predict_on_batch": [milliseconds(model.predict_on_batch, b) for b in batches],
        "compiled_predictor": [milliseconds(compiled_predictor(model), b) for b in batches],
        "jit_stateless_device_io": [milliseconds(lambda x: jax.block_until_ready(forward(x)), b) for b in on_device],
        "jit_queued_per_call": [milliseconds(queued, b, calls=5) / 20 for b in on_device],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", help="write the results (JSON) here")
    parser.add_argument("--quick", action="store_true", help="accelerator.py's tiny model: a smoke run (CPU)")
    arguments = parser.parse_args()
    import keras

    keras.config.set_dtype_policy("bfloat16")
    results = {}
    for library in ("bertlayers", "keras_hub"):
        results[library] = paths(library, arguments.quick)
        print(
            library,
            "batch 1 / 32 (ms):",
            {k: [round(v, 2) for v in pair] for k, pair in results[library].items()},
            flush=True,
        )
    if arguments.output:
        with open(arguments.output, "w") as file:
            json.dump(results, file, indent=1)


if __name__ == "__main__":
    main()

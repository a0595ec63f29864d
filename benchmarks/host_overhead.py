"""The host side of a call and of a training step, where the model's own work is negligible.

A tiny BERT (1 layer, H32, batch 1, 16 tokens) makes each call almost all overhead: dispatch,
argument flattening, host-device transfers, input checks, output conversion. Each row runs in its
own process; every figure is the median over `--repeats` repeats of the mean time of `--calls`
calls (microseconds), with the repeats' min-max.

Inference, one request at a time (numpy ids in, numpy outputs out unless the row says otherwise):
  jax_jit_device      a bare `jax.jit` of the encoder's `stateless_call`, weights and inputs already
                      on the device: the floor
  jax_jit             the same, numpy inputs in and every output back as numpy
  compiled_predictor  `bertlayers.models.compiled_predictor(model)` (input checks included)
  input_checks        those checks alone (`model.check_inputs`: dtype, rank, shape, id ranges)
  predict_on_batch    Keras's `model.predict_on_batch` (bertlayers' model)
  keras_hub_predict   keras-hub's `BertBackbone.predict_on_batch` (the same sizes)
  torch_eager / torch_compiled   transformers' `BertModel` (with `--torch_python`)

Training steps of a tiny classifier with `fit` (per step, after every shape has compiled):
  fit_fixed           every batch 16 tokens
  fit_grouped         lengths 8, 16, 24, 32, each length's batches together
  fit_alternating     the same lengths, changing every step

With `--fit_model busy` the `fit` rows train a classifier whose step has device work about the
size of its host work (1 layer, H64, batches of 32 at 32 tokens, or at 16, 32 and 48: the same
tokens a step on average): a loop that stopped overlapping the host's work with the device's
when the batch shape changes would show there as slower grouped or alternating steps.

    KERAS_BACKEND=jax python benchmarks/host_overhead.py --torch_python /path/to/torch/venv/bin/python
    python benchmarks/host_overhead.py --rows jax_jit compiled_predictor --repeats 5
    python benchmarks/host_overhead.py --rows fit_fixed fit_grouped fit_alternating --fit_model busy --repeats 7
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

SIZES = dict(vocabulary_size=1000, num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64)
MAX_LENGTH = 64  # the position table's length, every library's
LENGTHS = (8, 16, 24, 32)
# `--fit_model`: (model sizes, batch rows, the fixed length, the lengths the other rows mix)
FIT_MODELS = {
    "tiny": (SIZES, 8, 16, LENGTHS),
    "busy": (dict(SIZES, hidden_size=64, intermediate_size=256), 32, 32, (16, 32, 48)),
}
KERAS_ROWS = (
    "jax_jit_device",
    "jax_jit",
    "compiled_predictor",
    "input_checks",
    "predict_on_batch",
    "keras_hub_predict",
    "fit_fixed",
    "fit_grouped",
    "fit_alternating",
)
TORCH_ROWS = ("torch_eager", "torch_compiled")


def ids(rows, length, seed=0):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(5, SIZES["vocabulary_size"], (rows, length)).astype("int32")
    return {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids), "padding_mask": np.ones_like(token_ids)}


def timed(call, calls, repeats, warmup=20):
    """(median, min, max) over `repeats` of the mean microseconds of `calls` calls, after `warmup`."""
    for _ in range(warmup):
        call()
    means = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        means.append(1e6 * (time.perf_counter() - start) / calls)
    return statistics.median(means), min(means), max(means)


def keras_row(row, calls, repeats, fit_model="tiny"):
    import bertlayers  # noqa: F401 (first, as in every script)

    # isort: split
    import jax
    import keras

    from bertlayers.families.bert import BertEncoder
    from bertlayers.models import compiled_predictor

    keras.utils.set_random_seed(0)
    x = ids(1, 16)
    if row == "keras_hub_predict":
        import keras_hub

        backbone = keras_hub.models.BertBackbone(
            vocabulary_size=SIZES["vocabulary_size"],
            num_layers=SIZES["num_layers"],
            num_heads=SIZES["num_heads"],
            hidden_dim=SIZES["hidden_size"],
            intermediate_dim=SIZES["intermediate_size"],
            max_sequence_length=MAX_LENGTH,
        )
        return timed(lambda: backbone.predict_on_batch(x), calls, repeats)
    if row.startswith("fit"):
        return fit_row(row, repeats, fit_model)
    encoder = BertEncoder(**SIZES, max_sequence_length=MAX_LENGTH)
    if row in ("jax_jit_device", "jax_jit"):
        trainable = [v.value for v in encoder.trainable_variables]
        non_trainable = [v.value for v in encoder.non_trainable_variables]
        forward = jax.jit(lambda t, n, inputs: encoder.stateless_call(t, n, inputs, training=False)[0])
        if row == "jax_jit_device":
            on_device = jax.device_put(x)
            return timed(
                lambda: forward(trainable, non_trainable, on_device)["sequence_output"].block_until_ready(),
                calls,
                repeats,
            )
        return timed(
            lambda: {k: np.asarray(v) for k, v in forward(trainable, non_trainable, x).items()}, calls, repeats
        )
    if row == "compiled_predictor":
        predict = compiled_predictor(encoder)
        return timed(lambda: predict(x), calls, repeats)
    if row == "input_checks":  # what compiled_predictor checks on the host before each call
        return timed(lambda: encoder.check_inputs(x), calls, repeats)
    return timed(lambda: encoder.predict_on_batch(x), calls, repeats)


def fit_row(row, repeats, fit_model):
    """µs a `fit` step (median, min, max over `repeats` epochs), after a first epoch compiles every shape."""
    import bertlayers  # noqa: F401 (first, as in every script)

    # isort: split
    import keras

    from bertlayers.families.bert import BertEncoder
    from bertlayers.models import SequenceClassifier

    sizes, rows, fixed, mixed = FIT_MODELS[fit_model]
    model = SequenceClassifier(BertEncoder(**sizes, max_sequence_length=MAX_LENGTH), 2)
    model.compile(optimizer="adam")
    each = 32 // len(mixed)  # batches of each mixed length: an epoch of about 32 steps
    lengths = {
        "fit_fixed": [fixed] * (each * len(mixed)),
        "fit_grouped": sorted(mixed * each),
        "fit_alternating": list(mixed) * each,
    }[row]
    batches = [(ids(rows, length, seed), {"logits": np.arange(rows) % 2}) for seed, length in enumerate(lengths)]

    class Batches(keras.utils.PyDataset):
        def __len__(self):
            return len(batches)

        def __getitem__(self, index):
            return batches[index]

    data = Batches()
    # An epoch a call, the first compiling every shape; per step.
    epoch = timed(lambda: model.fit(data, epochs=1, verbose=0), 1, repeats, warmup=1)
    return tuple(value / len(batches) for value in epoch)


def torch_row(row, calls, repeats):
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=SIZES["vocabulary_size"],
        hidden_size=SIZES["hidden_size"],
        num_hidden_layers=SIZES["num_layers"],
        num_attention_heads=SIZES["num_heads"],
        intermediate_size=SIZES["intermediate_size"],
        max_position_embeddings=MAX_LENGTH,
    )
    model = transformers.BertModel(config).eval()
    if row == "torch_compiled":
        model = torch.compile(model)
    x = ids(1, 16)

    def call():
        with torch.inference_mode():
            inputs = {
                "input_ids": torch.from_numpy(x["token_ids"]).long(),
                "token_type_ids": torch.from_numpy(x["segment_ids"]).long(),
                "attention_mask": torch.from_numpy(x["padding_mask"]).long(),
            }
            return model(**inputs).last_hidden_state.numpy()

    return timed(call, calls, repeats)


def run_row(row, arguments):
    python = arguments.torch_python if row in TORCH_ROWS else sys.executable
    command = [python, os.path.abspath(__file__), "--worker", row, "--calls", str(arguments.calls)]
    command += ["--repeats", str(arguments.repeats), "--fit_model", arguments.fit_model]
    environment = dict(
        os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=os.environ.get("CUDA_VISIBLE_DEVICES", "")
    )
    if row not in TORCH_ROWS:
        environment["KERAS_BACKEND"] = "jax"
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=900)
    if done.returncode:
        return {"row": row, "failed": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no output"}
    return {"row": row, **json.loads(done.stdout.strip().splitlines()[-1])}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", nargs="+", default=list(KERAS_ROWS + TORCH_ROWS), choices=KERAS_ROWS + TORCH_ROWS)
    parser.add_argument("--calls", type=int, default=200, help="calls timed in each repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--torch_python", default=None, help="a Python with torch and transformers (torch rows)")
    parser.add_argument("--output", default=None, help="also write the results as JSON here")
    parser.add_argument(
        "--fit_model", choices=sorted(FIT_MODELS), default="tiny", help="the fit rows' model and batches (above)"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.worker:
        if arguments.worker in TORCH_ROWS:
            median, low, high = torch_row(arguments.worker, arguments.calls, arguments.repeats)
        else:
            median, low, high = keras_row(arguments.worker, arguments.calls, arguments.repeats, arguments.fit_model)
        print(json.dumps({"median_us": median, "min_us": low, "max_us": high}))
        return
    from bertlayers.utils.machine import cpu_model

    rows = [r for r in arguments.rows if r not in TORCH_ROWS or arguments.torch_python]
    results = [run_row(row, arguments) for row in rows]
    floor = next((r["median_us"] for r in results if r["row"] == "jax_jit_device" and "median_us" in r), None)
    print(
        f"{cpu_model()}, {os.cpu_count()} cores; {arguments.repeats} repeats of {arguments.calls} calls; "
        f"fit rows: the {arguments.fit_model} model"
    )
    print("| row | µs a call or step (median) | min-max | over the jax.jit floor |\n|---|---|---|---|")
    for result in results:
        if "failed" in result:
            print(f"| {result['row']} | failed: {result['failed'][:80]} | | |")
            continue
        ratio = f"{result['median_us'] / floor:.2f}x" if floor and not result["row"].startswith("fit") else ""
        print(
            f"| {result['row']} | {result['median_us']:.0f} | {result['min_us']:.0f}-{result['max_us']:.0f} | {ratio} |"
        )
    if arguments.output:
        with open(arguments.output, "w", encoding="utf-8") as f:
            json.dump({"machine": cpu_model(), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()

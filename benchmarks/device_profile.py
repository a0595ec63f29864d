"""Where accelerator.py's works spend their time under Keras's JAX backend: each call path timed,
and a `jax.profiler` trace of each work summarized by kernel and by host against device time.

The works are accelerator.py's (the same models, sizes and batches). For each it writes, to
`--output` after every part (a run cut short keeps what it measured):

  peak        bfloat16 matmul TFLOP/s on random 8192^2 matrices (median and min-max of 30), beside
              the device's nominal dense bfloat16 peak where the device is known
  infer       per call path (batch 1 and 32; ms, median and min-max of 5 repeats of 20 calls):
                predict_on_batch     Keras's own call (gathers and writes back the state each call)
                compiled_predictor   bertlayers' predictor: NumPy in and out
                jit_numpy_io         a bare `jax.jit` of `stateless_call`, weights read each call
                jit_device_io        the same with inputs already on the device, outputs left there
                device_per_call      20 calls queued, one sync: the device's own time per call
              for bertlayers' classifier and keras-hub's, and the trace of 20 predictor calls
  finetune    per path (steps/s over one pass of the 2,048 snippets, median and min-max of 5):
                fit_arrays_fixed     `fit` on NumPy arrays at the fixed length 64
                fit_batches_fixed    `fit` on a `PyDataset` of the same batches
                fit_batches_real     `fit` on a `PyDataset` of batches cut to their longest
                fit_batches_real_sorted     the same batches in order of length (3 shape changes)
                fit_batches_real_on_device  the same batches placed on the device beforehand
                step_fixed, step_real  a bare jitted train step (stateless_call, grad, the same
                                     optimizer's stateless_apply; state donated) over the same
              and the trace of one `fit` pass of the real-length batches
  mlm         bertlayers' BERT-base MLM step (accelerator.py's), attention dropout 0.1 and 0 (the
              fused kernel applies without dropout): seq/s, MFU, and the trace of 3 steps

A trace summary: wall time, the device's busy time (the union of its kernels' intervals), kernels
per step, the top kernels by time, and the top host events. Needs JAX (no TensorFlow), keras and
keras-hub; the real-length inputs come from `accelerator.py --prepare`.

    python benchmarks/device_profile.py --output benchmarks/device_profile_h100.json   # on the GPU
    python benchmarks/device_profile.py --quick                                       # CPU smoke run
    python benchmarks/device_profile.py --table benchmarks/device_profile_h100.json
"""

import argparse
import functools
import glob
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from accelerator import (  # noqa: E402
    MASKED,
    REPO,
    keras_batches,
    keras_model,
    matmul_peak,
    random_batch,
    real_batches,
    run_facts,
    sizes,
    spread,
)
from compare import mlm_flops_per_example  # noqa: E402

sys.path.insert(0, REPO)

REPEATS = 5
PARTS = ("infer", "finetune", "mlm", "peers")
LIBRARIES = ["bertlayers", "keras_hub"]


def versions():
    """accelerator.py's facts of the run, and the device JAX sees (this process is the worker)."""
    import jax

    device = jax.devices()[0]
    return dict(run_facts(), device=getattr(device, "device_kind", str(device)))


# --- the trace ---------------------------------------------------------------------------


TRACE = {"on": True}
SAVE = {"hook": lambda: None}  # main's save: parts call it after each path, so a cut-off part keeps its figures


def traced(function, steps):
    """Run `function` under `jax.profiler` and summarize the trace (per step: `steps`)."""
    import jax

    if not TRACE["on"]:
        return {"skipped": "--no_trace"}

    folder = tempfile.mkdtemp(prefix="trace-")
    start = time.perf_counter()
    with jax.profiler.trace(folder, create_perfetto_trace=True):
        function()
    wall_us = (time.perf_counter() - start) * 1e6
    files = glob.glob(os.path.join(folder, "**", "*.trace.json.gz"), recursive=True)
    if not files:
        return {"error": f"no trace written under {folder}"}
    with gzip.open(files[0], "rt") as file:
        trace = json.load(file)
    return summarize(trace, wall_us, steps)


def summarize(trace, wall_us, steps, top=12):
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    spans = [e for e in events if e.get("ph") == "X" and "dur" in e]
    device_pids = {pid for pid, name in processes.items() if "/device:" in name and "CPU" not in name.upper()}
    kernels = [e for e in spans if e["pid"] in device_pids]
    host = [e for e in spans if e["pid"] not in device_pids]

    def busy(intervals):
        total, end = 0.0, float("-inf")
        for begin, finish in sorted(intervals):
            if finish > end:
                total += finish - max(begin, end)
                end = finish
        return total

    def by_name(items):
        totals = {}
        for e in items:
            name = e["name"][:90]
            count, time_us = totals.get(name, (0, 0.0))
            totals[name] = (count + 1, time_us + e["dur"])
        ranked = sorted(totals.items(), key=lambda item: -item[1][1])[:top]
        return [{"name": n, "count": c, "us_per_step": t / steps} for n, (c, t) in ranked]

    device_busy = busy((e["ts"], e["ts"] + e["dur"]) for e in kernels)
    return {
        "steps": steps,
        "wall_us_per_step": wall_us / steps,
        "device_busy_us_per_step": device_busy / steps,
        "device_busy_fraction": device_busy / wall_us if wall_us else None,
        "kernels_per_step": len(kernels) / steps,
        "top_kernels": by_name(kernels),
        # Native events (dispatch, transfers, the runtime) apart from Python frames ("$file:line"),
        # which nest: their times include their callees'.
        "top_host_events": by_name([e for e in host if not e["name"].startswith("$")]),
        "top_python_frames": by_name([e for e in host if e["name"].startswith("$")]),
        "processes": sorted(set(processes.values()))[:20],
    }


# --- the works ---------------------------------------------------------------------------


def timed_calls(function, inputs, calls):
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(calls):
            function(inputs)
        times.append(1000 * (time.perf_counter() - start) / calls)
    return spread(times)


def infer(quick):
    import bertlayers  # noqa: F401 (first, as in every script)

    # isort: split
    import jax
    import keras
    import numpy as np

    from bertlayers.models import compiled_predictor

    keras.config.set_dtype_policy("bfloat16")
    model_size, sequence, batch, _ = sizes("infer", quick)
    rng = np.random.default_rng(0)
    batches = {1: random_batch(rng, 1, sequence), batch: random_batch(rng, batch, sequence)}
    results = {}
    for library in LIBRARIES:
        model = keras_model(library, "infer", model_size, sequence)
        predictor = compiled_predictor(model)
        forward = jax.jit(lambda t, n, x, model=model: model.stateless_call(t, n, x, training=False)[0])

        def bare(inputs, forward=forward, model=model):
            return forward(
                [v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables], inputs
            )

        def numpy_io(inputs, bare=bare):
            return jax.tree.map(np.asarray, bare(inputs))

        def device_io(inputs, bare=bare):
            return jax.block_until_ready(bare(inputs))

        def queued(inputs, bare=bare):
            for _ in range(20):
                outputs = bare(inputs)
            return jax.block_until_ready(outputs)

        rows = {}
        for rows_in, inputs in batches.items():
            on_device = jax.device_put(inputs)
            for path in (model.predict_on_batch, predictor, numpy_io, device_io, queued):
                for _ in range(3):
                    path(on_device if path in (device_io, queued) else inputs)
            queued_ms = timed_calls(queued, on_device, 2)
            rows[rows_in] = {
                "predict_on_batch": timed_calls(model.predict_on_batch, inputs, 20),
                "compiled_predictor": timed_calls(predictor, inputs, 20),
                "jit_numpy_io": timed_calls(numpy_io, inputs, 20),
                "jit_device_io": timed_calls(device_io, on_device, 20),
                "device_per_call": {k: v / 20 if k != "n" else v for k, v in queued_ms.items()},
                "trace_compiled_predictor": traced(
                    lambda inputs=inputs, run=predictor: [run(inputs) for _ in range(20)], 20
                ),
            }
        results[library] = rows
        print(
            library,
            json.dumps({r: {k: v.get("median") for k, v in row.items()} for r, row in rows.items()}),
            flush=True,
        )
    return results


def train_pieces(work, quick, attention_dropout=0.1):
    import bertlayers  # noqa: F401 (first, as in every script)

    # isort: split
    import keras

    from bertlayers.training import create_optimizer

    keras.config.set_dtype_policy("mixed_bfloat16")
    model_size, sequence, batch, steps = sizes(work, quick)
    model = keras_model("bertlayers", work, dict(model_size, attention_dropout=attention_dropout), sequence)
    optimizer = create_optimizer(1e-4, 10_000, 100, weight_decay=0.01)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    output = "mlm" if work == "mlm" else "logits"
    model.compile(optimizer=optimizer, loss={output: loss})
    return model, optimizer, loss, output, batch, steps


def bare_step(model, optimizer, loss, output):
    """A jitted train step of `model` (grad of its loss, `optimizer.stateless_apply`), state donated."""
    import jax

    optimizer.build(model.trainable_variables)

    def step(trainable, non_trainable, optimizer_state, inputs, targets):
        def objective(trainable):
            outputs, new_non_trainable = model.stateless_call(trainable, non_trainable, inputs, training=True)
            return loss(targets, outputs[output]), new_non_trainable

        (value, non_trainable), grads = jax.value_and_grad(objective, has_aux=True)(trainable)
        trainable, optimizer_state = optimizer.stateless_apply(optimizer_state, grads, trainable)
        return trainable, non_trainable, optimizer_state, value

    compiled = jax.jit(step, donate_argnums=(0, 1, 2))
    state = [
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in optimizer.variables],
    ]

    def run(batches):
        for inputs, targets in batches:
            state[0], state[1], state[2], value = compiled(*state, inputs, targets)
        return jax.block_until_ready(value)

    return run


def on_device(batches, output):
    """`batches` ((inputs, labels) pairs) placed on the device once, as a `PyDataset`."""
    import jax
    import keras

    placed = [(jax.device_put(inputs), {output: jax.device_put(labels)}) for inputs, labels in batches]

    class Placed(keras.utils.PyDataset):
        def __len__(self):
            return len(placed)

        def __getitem__(self, index):
            return placed[index]

    return Placed()


def finetune(quick):
    import numpy as np

    results = {}
    model, optimizer, loss, output, batch, _ = train_pieces("finetune_real", quick)
    real, _ = real_batches(quick, by_length=True)
    fixed, _ = real_batches(quick, by_length=False)

    def as_inputs(batches):
        return [({"token_ids": t, "segment_ids": 0 * t, "padding_mask": m}, y.astype("int32")) for t, m, y in batches]

    arrays = {
        k: np.concatenate([b[0][k] for b in as_inputs(fixed)]) for k in ("token_ids", "segment_ids", "padding_mask")
    }
    labels = np.concatenate([b[2] for b in fixed])
    steps = len(fixed)
    # Where real-length fit loses on a GPU: per shape change (the same batches sorted by length
    # change shape 3 times a pass), or per host-to-device copy (the batches placed beforehand)?
    by_width = sorted(real, key=lambda b: b[0].shape[1])
    placed = on_device(as_inputs(real), output)
    paths = {
        "fit_arrays_fixed": lambda: model.fit(arrays, {output: labels}, batch_size=batch, shuffle=False, verbose=0),
        "fit_batches_fixed": lambda: model.fit(keras_batches(fixed), epochs=1, verbose=0),
        "fit_batches_real": lambda: model.fit(keras_batches(real), epochs=1, verbose=0),
        "fit_batches_real_sorted": lambda: model.fit(keras_batches(by_width), epochs=1, verbose=0),
        "fit_batches_real_on_device": lambda: model.fit(placed, epochs=1, verbose=0),
    }
    for name, run in paths.items():
        run()  # compiles every shape
        times = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            run()
            times.append(steps / (time.perf_counter() - start))
        results[name] = {"steps_per_s": spread(times)}
        print(name, round(results[name]["steps_per_s"]["median"], 1), "steps/s", flush=True)
        SAVE["hook"](finetune=results)
    results["trace_fit_batches_real"] = traced(paths["fit_batches_real"], steps)
    results["trace_fit_batches_fixed"] = traced(paths["fit_batches_fixed"], steps)
    step = bare_step(model, optimizer, loss, output)
    for name, batches in (("step_fixed", as_inputs(fixed)), ("step_real", as_inputs(real))):
        step(batches)
        times = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            step(batches)
            times.append(steps / (time.perf_counter() - start))
        results[name] = {"steps_per_s": spread(times)}
        print(name, round(results[name]["steps_per_s"]["median"], 1), "steps/s", flush=True)
        SAVE["hook"](finetune=results)
    results["trace_step_real"] = traced(lambda: step(as_inputs(real)), steps)
    return results


def mlm(quick, peak_tflops):
    import numpy as np

    results = {}
    for dropout in (0.1, 0.0):
        model, _, _, output, batch, steps = train_pieces("mlm", quick, attention_dropout=dropout)
        model_size = sizes("mlm", quick)[0]
        data = random_batch(np.random.default_rng(0), batch * steps, sizes("mlm", quick)[1], masked=MASKED)
        targets = {output: data.pop("masked_ids")}
        model.fit(
            {k: v[: batch * 2] for k, v in data.items()},
            {output: targets[output][: batch * 2]},
            batch_size=batch,
            verbose=0,
        )
        times = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            model.fit(data, targets, batch_size=batch, shuffle=False, verbose=0)
            times.append(batch * steps / (time.perf_counter() - start))
        row = {"seq_per_s": spread(times)}
        if peak_tflops:
            row["mfu_measured_peak"] = (
                statistics.median(times) * mlm_flops_per_example(model_size) / (peak_tflops * 1e12)
            )
        three = ({k: v[: batch * 3] for k, v in data.items()}, {output: targets[output][: batch * 3]})
        row["trace"] = traced(functools.partial(model.fit, *three, batch_size=batch, verbose=0), 3)
        results[f"attention_dropout_{dropout}"] = row
        print("mlm dropout", dropout, round(statistics.median(times)), "seq/s", flush=True)
    return results


def peers(quick):
    """transformers' BERT-base classifier inference, eager and `torch.compile`, each in its own
    process (accelerator.py's worker): the same batches, in the same run."""
    found = {}
    for library in ("transformers", "transformers_compile"):
        command = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "accelerator.py")]
        command += ["--worker", library, "infer"] + (["--quick"] if quick else [])
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        lines = done.stdout.strip().splitlines()
        found[library] = json.loads(lines[-1]) if done.returncode == 0 and lines else {"error": done.stderr[-400:]}
        print(library, found[library], flush=True)
    return found


def show(results):
    lines = [json.dumps(results.get("versions", {})), json.dumps(results.get("peak", {}))]
    for work in PARTS:
        for key, value in _leaves(results.get(work, {}), work):
            lines.append(f"{key}: {value}")
    return "\n".join(lines)


def _leaves(tree, prefix):
    if isinstance(tree, dict) and "median" in tree:
        yield prefix, f"{tree['median']:.4g} ({tree['min']:.4g}-{tree['max']:.4g})"
    elif isinstance(tree, dict) and "wall_us_per_step" in tree:
        yield (
            prefix,
            (
                f"wall {tree['wall_us_per_step']:.0f} us/step, device busy {tree['device_busy_us_per_step']:.0f} us "
                f"({tree['device_busy_fraction']:.0%}), {tree['kernels_per_step']:.0f} kernels/step"
            ),
        )
        for kernel in tree["top_kernels"][:6]:
            yield f"{prefix}  kernel", f"{kernel['us_per_step']:.0f} us  x{kernel['count']}  {kernel['name']}"
        for event in tree["top_host_events"][:6]:
            yield f"{prefix}  host", f"{event['us_per_step']:.0f} us  x{event['count']}  {event['name']}"
        for event in tree.get("top_python_frames", [])[2:8]:
            yield f"{prefix}  python", f"{event['us_per_step']:.0f} us  x{event['count']}  {event['name']}"
    elif isinstance(tree, dict):
        for key, value in tree.items():
            yield from _leaves(value, f"{prefix}.{key}")
    elif isinstance(tree, float):
        yield prefix, f"{tree:.4g}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", help="write the results (JSON) here, after every part")
    parser.add_argument("--quick", action="store_true", help="accelerator.py's tiny sizes: a smoke run (CPU)")
    parser.add_argument("--part", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--no_trace", action="store_true", help="time the paths only (no profiler traces)")
    parser.add_argument("--libraries", nargs="+", choices=LIBRARIES, default=LIBRARIES, help="the infer part's models")
    parser.add_argument("--table", metavar="RESULTS", help="print a results file's figures and stop")
    arguments = parser.parse_args()
    os.environ.setdefault("KERAS_BACKEND", "jax")  # before the parts import Keras
    if arguments.table:
        with open(arguments.table) as file:
            return print(show(json.load(file)))
    TRACE["on"] = not arguments.no_trace
    LIBRARIES[:] = arguments.libraries
    results = {"quick": arguments.quick, "versions": versions(), "xla_flags": os.environ.get("XLA_FLAGS", "")}
    results["peak"] = matmul_peak(arguments.quick)
    print("peak", json.dumps(results["peak"]), flush=True)

    def save(**partial):
        results.update(partial)
        if arguments.output:
            with open(arguments.output + ".tmp", "w") as file:
                json.dump(results, file, indent=1)
            os.replace(arguments.output + ".tmp", arguments.output)

    save()
    SAVE["hook"] = save
    for part in arguments.part:
        try:
            if part == "mlm":
                results[part] = mlm(arguments.quick, results["peak"]["tflops"])
            else:
                results[part] = globals()[part](arguments.quick)
        except Exception as error:  # noqa: BLE001 - one part failing keeps the others' figures
            import traceback

            traceback.print_exc()
            results[part] = {"error": f"{type(error).__name__}: {error}"[:500]}
        save()
    print(show(results))


if __name__ == "__main__":
    main()

"""Where the time goes: TensorFlow op types ranked by their summed time in a few traced steps.

Two works on the MiniLM classifier (L6 H384, the real all-MiniLM-L6-v2 weights), inputs of
`--batch_size` rows of `--length` random real-vocabulary ids:

  finetune  `model.fit` steps (AdamW as `create_optimizer` builds it, dropout on)
  serve     calls of an exported ids SavedModel's `serving_default` (`--model`, or the classifier
            exported to a temporary folder)

and `compare.py`'s MLM pretraining steps, its model and batch (`--batch_size` and `--length` do
not apply): `mlm_l4` (L4 H512, 32 x 128) and `mlm_base` (BERT-base, 8 x 128).

    python benchmarks/op_profile.py --work finetune --batch_size 32 --length 32
    python benchmarks/op_profile.py --work serve --batch_size 32 --length 48
    TF_ENABLE_ONEDNN_OPTS=0 python benchmarks/op_profile.py --work serve    # without oneDNN's rewrites
    python benchmarks/op_profile.py --work finetune --length 32 --precision bfloat16 [--any_length]
    python benchmarks/op_profile.py --work finetune --length 64 --shortest 8   # fixed-length batches, padded
    python benchmarks/op_profile.py --work serve --batch_size 1 --length 27 --steps 200 --threads 1 1
    python benchmarks/op_profile.py --work serve --batch_size 1 --length 27 --steps 200 --precision int8
    python benchmarks/op_profile.py --work mlm_l4 --steps 8
    python benchmarks/op_profile.py --work finetune --length 28 --any_length --split Mul   # Mul by name scope

Times are summed over TensorFlow's executor threads, so ops that run side by side add up to
more than the wall time; the shares say where the work is. The trace is TensorFlow's profiler
(`tf.profiler.experimental`), read from its XSpace file without TensorBoard.
"""

import argparse
import collections
import glob
import os
import re
import tempfile
import time

# bertlayers first: it loads TensorFlow with the settings its users get (oneDNN rewrites on).
import bertlayers  # noqa: F401

# isort: split
import numpy as np
import tensorflow as tf

from bertlayers.utils.assets import minilm_path


def classifier(dtype="float32"):
    from bertlayers.convert.loading import load_encoder
    from bertlayers.models import SequenceClassifier

    return SequenceClassifier(load_encoder(minilm_path(), dtype=dtype), 2)


def inputs(batch_size, length, shortest=None):
    """Random ids; every row real to its end, or (`shortest`) real to a length drawn from
    [shortest, length] and padded after it, as a fixed-length batch of real text is."""
    rng = np.random.default_rng(0)
    real = np.full(batch_size, length) if shortest is None else rng.integers(shortest, length + 1, batch_size)
    padding_mask = (np.arange(length)[None, :] < real[:, None]).astype("int32")  # [B, S]
    return {
        "token_ids": rng.integers(1000, 20000, (batch_size, length)).astype("int32") * padding_mask,
        "segment_ids": np.zeros((batch_size, length), "int32"),
        "padding_mask": padding_mask,
    }


def finetune_data(batch_size, length, steps, shortest=None, any_length=False):
    """`steps` copies of one labelled batch of `inputs`; with `any_length`, typed `[batch, None]`
    so that Keras traces the step for any length, as it does for `length_batches`' batches."""
    x = inputs(batch_size, length, shortest)
    y = {"logits": np.random.default_rng(1).integers(0, 2, batch_size)}
    if not any_length:
        return tf.data.Dataset.from_tensors((x, y)).repeat(steps)
    spec = ({k: tf.TensorSpec([None, None], tf.int32) for k in x}, {"logits": tf.TensorSpec([None], tf.int64)})
    return tf.data.Dataset.from_generator(lambda: iter([(x, y)] * steps), output_signature=spec)


def finetune_step(args):
    from bertlayers.training.optimization import create_optimizer

    model = classifier(policy(args))
    model.compile(optimizer=create_optimizer(5e-5, 1000, 100, weight_decay=0.01))
    data = finetune_data(args.batch_size, args.length, args.steps, args.shortest, args.any_length)
    return fit_steps(model, data), args.steps


def mlm_step(args):
    from compare import bertlayers_pretrainer

    model, x, y, weights = bertlayers_pretrainer(args.work, policy(args))
    return fit_steps(model, tf.data.Dataset.from_tensors((x, y, weights)).repeat(args.steps)), args.steps


def policy(args):
    return "mixed_bfloat16" if args.precision == "bfloat16" else "float32"


def fit_steps(model, data):
    """One epoch of `model.fit` over `data`, as a function to time; traced and warmed up first."""
    model.fit(data, epochs=1, verbose=0)
    return lambda: model.fit(data, epochs=1, verbose=0)


def serve_call(args, folder):
    path = args.model
    if path is None:
        from bertlayers.export import export_for_serving

        path = export_for_serving(
            classifier(), "profiled", base_dir=folder, sequence_length=128, text=False, precision=args.precision
        )["profiled"]
    signature = tf.saved_model.load(path).signatures["serving_default"]
    x = {k: tf.constant(v) for k, v in inputs(args.batch_size, args.length, args.shortest).items()}

    def run():
        for _ in range(args.steps):
            [value.numpy() for value in signature(**x).values()]

    run()
    return run, args.steps


def op_events(trace_folder):
    """(node name, op type, seconds) of every op the executor threads ran in the trace."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(glob.glob(os.path.join(trace_folder, "**", "*.xplane.pb"), recursive=True)[0], "rb") as f:
        space.ParseFromString(f.read())
    for plane in space.planes:
        for line in plane.lines:
            if not line.name.startswith("tf_Compute") and not line.name.startswith("tf_inter_op"):
                continue
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if ":" not in name:
                    continue
                node, op = name.rsplit(":", 1)  # "node name:OpType"
                if op != "Process":  # "...:Process" spans a whole function run, not an op
                    yield node, op, event.duration_ps * 1e-12


def op_times(events):
    """{op type: summed seconds}."""
    totals = collections.Counter()
    for _, op, seconds in events:
        totals[op] += seconds
    return totals


def scope_times(events, op_type):
    """{scope: summed seconds} of the ops of type `op_type`, by the name scope that made them.

    Scopes are read from node names with the function-call prefix, the op's own name and the
    numeric suffixes Keras and TensorFlow add taken away, so every layer's GELU lands in one
    scope (`.../transformer_layer/Gelu`) and its gradient in another (`gradient_tape/...`).
    """
    totals = collections.Counter()
    for node, op, seconds in events:
        if op == op_type:
            parts = [re.sub(r"(_\d+)+$", "", part) for part in node.split("/")[:-1]]
            scope = "/".join(part for part in parts if part != "StatefulPartitionedCall")
            totals[scope or "(top level)"] += seconds
    return totals


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", choices=("finetune", "serve", "mlm_l4", "mlm_base"), default="serve")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--length", type=int, default=48)
    parser.add_argument("--steps", type=int, default=3, help="steps (or calls) traced")
    parser.add_argument("--model", help="serve: an ids SavedModel version folder (default: export the classifier)")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument(
        "--precision",
        choices=("float32", "bfloat16", "int8"),
        default="float32",
        help="finetune and MLM: the model's policy (bfloat16: mixed_bfloat16); serve: the export's precision "
        "(int8: serve only)",
    )
    parser.add_argument(
        "--shortest",
        type=int,
        help="pad the rows: each one real up to a length drawn from [--shortest, --length] (default: no padding)",
    )
    parser.add_argument(
        "--any_length",
        action="store_true",
        help="finetune: trace the step with the sequence "
        "length unknown (length_batches' batches) instead of fixed at --length",
    )
    parser.add_argument(
        "--threads",
        type=int,
        nargs=2,
        metavar=("INTRA_OP", "INTER_OP"),
        help="TensorFlow's intra-op and inter-op thread pools (TF Serving's "
        "--tensorflow_intra_op_parallelism / --tensorflow_inter_op_parallelism; default: one "
        "thread per core each)",
    )
    parser.add_argument(
        "--split",
        metavar="OP_TYPE",
        help="also list this op type's time by the name scope "
        "that made it (say Mul: GELU's, LayerNorm's, the optimizer's)",
    )
    args = parser.parse_args()
    if args.precision == "int8" and args.work != "serve":
        parser.error("--precision int8 is an export's: --work serve")
    if args.work.startswith("mlm") and (args.any_length or args.shortest):
        parser.error("--any_length and --shortest apply to finetune and serve, not to the MLM works")
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads[0])
        tf.config.threading.set_inter_op_parallelism_threads(args.threads[1])

    with tempfile.TemporaryDirectory() as folder:
        if args.work == "serve":
            run, steps = serve_call(args, folder)
        else:
            run, steps = finetune_step(args) if args.work == "finetune" else mlm_step(args)
        start = time.perf_counter()
        run()
        wall = (time.perf_counter() - start) / steps
        trace = os.path.join(folder, "trace")
        tf.profiler.experimental.start(trace)
        run()
        tf.profiler.experimental.stop()
        events = list(op_events(trace))
        totals = op_times(events)
    everything = sum(totals.values())
    threads = f", threads {args.threads[0]}/{args.threads[1]}" if args.threads else ""
    if args.work.startswith("mlm"):
        from compare import MLM_SEQUENCE, MLM_SIZES

        shape = f"batch {MLM_SIZES[args.work]['batch_size']} x length {MLM_SEQUENCE}"
    else:
        shape = f"batch {args.batch_size} x length {args.length}"
    print(
        f"{args.work} {args.precision}{' any length' if args.any_length else ''}, {shape}"
        f"{f' (real lengths from {args.shortest})' if args.shortest else ''}, TF_ENABLE_ONEDNN_OPTS="
        f"{os.environ.get('TF_ENABLE_ONEDNN_OPTS')}{threads}: {wall * 1000:.1f} ms per step untraced; "
        f"op time {everything / steps * 1000:.1f} ms per step over the threads"
    )
    print("| op type | ms per step | share |")
    print("|---|---|---|")
    for op, seconds in totals.most_common(args.top):
        print(f"| {op} | {seconds / steps * 1000:.1f} | {seconds / everything:.1%} |")
    if args.split:
        scopes = scope_times(events, args.split)
        if not scopes:
            raise SystemExit(
                f"No {args.split} op ran in the traced steps (op types are as the table above spells them)."
            )
        print(f"\n{args.split} by name scope ({sum(scopes.values()) / steps * 1000:.1f} ms per step in all)")
        print(f"| scope | ms per step | share of {args.split} |")
        print("|---|---|---|")
        for scope, seconds in scopes.most_common(args.top):
            print(f"| {scope} | {seconds / steps * 1000:.1f} | {seconds / sum(scopes.values()):.1%} |")


if __name__ == "__main__":
    main()

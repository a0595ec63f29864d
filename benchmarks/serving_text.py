"""Time text SavedModels answering real review snippets, as TF Serving would run them.

Each model's `serving_default` (a `text` input) answers Rotten Tomatoes snippets in their
natural length mix: batch-1 latency (p50 / p99 over `--requests` requests) and batch-32
throughput. All models run in this one process, one after another, on the same snippets, so
the ratios are comparable; the first model is the baseline of the ratio column. Tokenization
is inside the graph and is timed.

    python examples/export_savedmodel.py --model runs/demo/sentiment/model.keras --name rt128 \\
        --vocabulary <the model's vocab.txt> --sequence_length 128
    python benchmarks/serving_text.py --model savedmodels/rt128/1 [--model OTHER ...]
"""

import argparse
import glob
import importlib.util
import os
import platform
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def load_text_ops():
    """tensorflow-text's kernels only, as a server links them (its Python package imports Keras)."""
    folder = importlib.util.find_spec("tensorflow_text").submodule_search_locations[0]
    for library in sorted(glob.glob(os.path.join(folder, "python", "ops", "*.so"))):
        tf.load_op_library(library)


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next(line for line in f if line.startswith("model name")).split(":", 1)[1].strip()
    except (OSError, StopIteration):
        return platform.machine()


def snippets(count):
    from bertlayers.data.assets import rotten_tomatoes_snippets

    return [text for text, _ in rotten_tomatoes_snippets()[:count]]


def measure(path, texts, requests, batch_size, rounds):
    signature = tf.saved_model.load(path).signatures["serving_default"]
    call = lambda batch: signature(text=tf.constant(batch))  # noqa: E731
    for text in texts[:8]:  # warm-up: first calls build kernels
        call([text])
    call(texts[:batch_size])
    latencies = []
    for text in texts[:requests]:
        start = time.perf_counter()
        call([text])
        latencies.append(time.perf_counter() - start)
    batches = [texts[i : i + batch_size] for i in range(0, len(texts) - batch_size + 1, batch_size)]
    start = time.perf_counter()
    served = 0
    for _ in range(rounds):
        for batch in batches:
            call(batch)
            served += len(batch)
    throughput = served / (time.perf_counter() - start)
    return 1000 * np.percentile(latencies, 50), 1000 * np.percentile(latencies, 99), throughput


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", required=True, help="a text SavedModel version folder (repeat)")
    parser.add_argument("--requests", type=int, default=300, help="batch-1 requests timed per model")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2, help="passes over the snippets at --batch_size")
    parser.add_argument("--snippets", type=int, default=640)
    args = parser.parse_args()

    load_text_ops()
    texts = snippets(args.snippets)
    print(f"{cpu_model()}, {os.cpu_count()} cores, TensorFlow {tf.__version__}; "
          f"{len(texts)} Rotten Tomatoes snippets")
    rows = [(path, *measure(path, texts, args.requests, args.batch_size, args.rounds)) for path in args.model]
    base = rows[0]
    print(f"| model | batch 1 p50 ms | batch 1 p99 ms | batch {args.batch_size} examples/s | p50 speed-up | batch {args.batch_size} speed-up |")
    print("|---|---|---|---|---|---|")
    for path, p50, p99, throughput in rows:
        print(f"| {path} | {p50:.2f} | {p99:.2f} | {throughput:.1f} | {base[1] / p50:.2f}x | {throughput / base[3]:.2f}x |")


if __name__ == "__main__":
    main()

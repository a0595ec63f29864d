"""Timing text SavedModels the way TF Serving runs them: what the serving benchmark and the
distillation example measure."""

import glob
import importlib.util
import os
import time

import numpy as np


def load_text_ops():
    """tensorflow-text's kernels only, as a server links them (its Python package imports Keras)."""
    import tensorflow as tf

    folder = importlib.util.find_spec("tensorflow_text").submodule_search_locations[0]
    for library in sorted(glob.glob(os.path.join(folder, "python", "ops", "*.so"))):
        tf.load_op_library(library)


def serving_latency(path, texts, requests=300, batch_size=32, rounds=2):
    """Time the `serving_default` text signature of the SavedModel at `path` (`request_latency`)."""
    import tensorflow as tf

    signature = tf.saved_model.load(path).signatures["serving_default"]
    return request_latency(lambda batch: signature(text=tf.constant(batch)), texts, requests, batch_size, rounds)


def request_latency(call, texts, requests=300, batch_size=32, rounds=2):
    """Time `call(list of strings)`, a text-in model, on `texts` in their natural length mix.

    Returns (batch-1 p50 ms, batch-1 p99 ms, examples/s at `batch_size`), after a warm-up:
    the first calls build kernels. Tokenization is whatever `call` does, and is timed. Plain
    Python and numpy, so the benchmark's peers (torch) time themselves with the same protocol.
    """
    for text in texts[:8]:
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
    throughput = served / (time.perf_counter() - start) if served else float("nan")
    return 1000 * np.percentile(latencies, 50), 1000 * np.percentile(latencies, 99), throughput

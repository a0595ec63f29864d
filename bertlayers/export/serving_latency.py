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


def text_signature(path):
    """The `serving_default` of a text SavedModel; a ValueError naming an ids model."""
    signature = serving_signature(path)
    inputs = sorted(signature.structured_input_signature[1])
    if inputs != ["text"]:
        raise ValueError(
            f"{path}'s serving_default takes {', '.join(inputs)}, not text: an ids model "
            "(the benchmark feeds it pretokenized requests with --ids_model and --vocabulary)."
        )
    return signature


def answered_texts(path, texts):
    """The `texts` the text SavedModel at `path` answers: one exported without truncation refuses
    a text longer than its sequence length, as a server would."""
    import tensorflow as tf

    signature = text_signature(path)
    answered = []
    for text in texts:
        try:
            signature(text=tf.constant([text]))
        except tf.errors.InvalidArgumentError:
            continue
        answered.append(text)
    return answered


def serving_latency(path, texts, requests=300, batch_size=32, rounds=2):
    """Time the `serving_default` text signature of the SavedModel at `path` (`request_latency`)."""
    import tensorflow as tf

    signature = text_signature(path)
    return request_latency(lambda batch: signature(text=tf.constant(batch)), texts, requests, batch_size, rounds)


def serving_signature(path):
    """The `serving_default` signature of the SavedModel version folder at `path`; a ValueError
    naming the folder when it holds none."""
    import tensorflow as tf

    if not os.path.isfile(os.path.join(path, "saved_model.pb")):
        raise FileNotFoundError(
            f"No SavedModel at {path} (a version folder such as savedmodels/NAME/1 holds saved_model.pb)."
        )
    signatures = tf.saved_model.load(path).signatures
    if "serving_default" not in signatures:
        raise ValueError(f"{path} has no serving_default signature (it has {', '.join(signatures) or 'none'}).")
    return signatures["serving_default"]


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

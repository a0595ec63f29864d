"""Batch-1 latency of text `.tflite` models (examples/export_savedmodel.py --tflite) on real Rotten
Tomatoes snippets, tokenization included, in this process:

    python benchmarks/tflite_latency.py --model savedmodels/tflite/rt_text.tflite \
        --model savedmodels/tflite/rt_int8_text.tflite

Prints p50 / p99 milliseconds and the file's size a model, and how far each model's logits are
from the first's (the same snippets). With `--ids_model` (repeat), ids `.tflite` files are timed on
the same snippets tokenized beforehand (`--vocabulary`, default the bundled MiniLM's), each request
cut to its length: the model without its tokenizer, so the two together give the tokenizer's share.

    python benchmarks/tflite_latency.py --model savedmodels/tflite/rt_int8_text.tflite \
        --ids_model savedmodels/tflite/rt_int8.tflite"""

import argparse
import os
import time

import numpy as np


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", default=[], help="a text .tflite file (repeat)")
    parser.add_argument("--ids_model", action="append", default=[], help="an ids .tflite file (repeat)")
    parser.add_argument("--vocabulary", help="the ids models' vocab.txt (default: the bundled MiniLM's)")
    parser.add_argument("--sequence_length", type=int, default=128, help="the ids models' exported length")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    from bertlayers.export import tflite_interpreter
    from bertlayers.utils.assets import rotten_tomatoes_snippets

    if not args.model and not args.ids_model:
        parser.error("give --model or --ids_model")
    texts = [text for text, _ in rotten_tomatoes_snippets()[: args.requests]]
    first = None
    for path in args.model:
        runner = tflite_interpreter(path, num_threads=args.threads).get_signature_runner("serving_default")
        for text in texts[:20]:  # warm-up
            runner(text=np.array([text]))
        times, logits = [], []
        for text in texts:
            start = time.perf_counter()
            answer = runner(text=np.array([text]))
            times.append(1000 * (time.perf_counter() - start))
            logits.append(answer["logits"][0])
        logits = np.array(logits)
        first = logits if first is None else first
        print(
            f"{path}: p50 {np.percentile(times, 50):.2f} ms, p99 {np.percentile(times, 99):.2f} ms, "
            f"{os.path.getsize(path) / 1e6:.1f} MB, logits within {np.abs(logits - first).max():.4f} of the first, "
            f"the same label for {100 * np.mean(logits.argmax(-1) == first.argmax(-1)):.1f}%"
        )

    if args.ids_model:
        time_ids_models(args, texts)


def time_ids_models(args, texts):
    """p50 / p99 of each ids model on `texts` tokenized first, a request cut to its real tokens."""
    from bertlayers.export import tflite_interpreter
    from bertlayers.tokenizers import model_tokenizer
    from bertlayers.utils.assets import minilm_path

    packed = model_tokenizer(args.vocabulary or os.path.join(minilm_path(), "vocab.txt")).packer(args.sequence_length)(
        texts
    )
    requests = []
    for row in range(len(texts)):
        length = int(packed["padding_mask"][row].sum())
        requests.append({name: np.asarray(value[row : row + 1, :length], np.int32) for name, value in packed.items()})
    for path in args.ids_model:
        runner = tflite_interpreter(path, num_threads=args.threads).get_signature_runner("serving_default")
        for request in requests[:20]:  # warm-up
            runner(**request)
        times = []
        for request in requests:
            start = time.perf_counter()
            runner(**request)
            times.append(1000 * (time.perf_counter() - start))
        print(
            f"{path} (ids, tokenized beforehand): p50 {np.percentile(times, 50):.2f} ms, "
            f"p99 {np.percentile(times, 99):.2f} ms, {os.path.getsize(path) / 1e6:.1f} MB"
        )


if __name__ == "__main__":
    main()

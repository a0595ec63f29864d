"""What a served model costs in memory in a process that loads only the SavedModel: the real
MiniLM classifier (all-MiniLM-L6-v2 with a 2-class head) exported text-in and ids-in, each loaded in
a fresh Python with TensorFlow (and tensorflow-text's kernels for the text model) but no Keras or
bertlayers, answering real review snippets; the resident memory (VmRSS) after each stage and the
peak so far (VmHWM), one lever a row:

  as exported       the text model, nothing changed
  ids in            the ids model (the client tokenizes): no tensorflow-text kernels
  2 malloc arenas   MALLOC_ARENA_MAX=2 (glibc makes up to 8 per core for the threads' allocations)
  oneDNN off        TF_ENABLE_ONEDNN_OPTS=0 (TensorFlow's oneDNN rewrites and their primitive caches)
  one thread each   TF_NUM_INTRAOP_THREADS=1, TF_NUM_INTEROP_THREADS=1 (fewer pools and stacks)

and, with `--torch_python`, transformers' `AutoModelForSequenceClassification` over the same folder
with its fast tokenizer, in that Python (torch's CPU build), `torch.inference_mode`; with
`--litert_python` (a Python with ai-edge-litert and tokenizers, no TensorFlow), the ids model
converted to TFLite (`export_tflite`, float32 and dynamic-range int8) run by LiteRT's interpreter on
every core, the `tokenizers` library tokenizing with the checkpoint's tokenizer.json (the ids it
gives are the library's own: tests/test_tokenizer.py).

Stages: python (the interpreter), runtime (the framework imported), loaded (the model loaded, its
signature taken), batch 1 (one review answered), batch 32 (32 answered); at the end, the resident
memory split into anonymous (heap, stacks) and file-backed (the mapped libraries' pages).

    python benchmarks/serving_memory.py --torch_python /path/to/torch/venv/bin/python --rounds 2 \
        --litert_python /path/to/litert/venv/bin/python   # pip install ai-edge-litert tokenizers
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from memory_stages import resident_mb

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
LEVERS = {
    "as exported": ("text", {}),
    "ids in": ("ids", {}),
    "2 malloc arenas": ("text", {"MALLOC_ARENA_MAX": "2"}),
    "oneDNN off": ("text", {"TF_ENABLE_ONEDNN_OPTS": "0"}),
    "one thread each": ("text", {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}),
}
STAGES = ("python", "runtime", "loaded", "batch 1", "batch 32")


def mapped_mb():
    """{"anonymous": MB, "file-backed": MB} of the resident memory now (/proc/self/smaps_rollup):
    heap and stacks, against the pages of mapped files (the libraries' code and data, which
    processes running the same libraries share)."""
    found = {}
    with open("/proc/self/smaps_rollup") as rollup:
        for line in rollup:
            key, _, value = line.partition(":")
            if key in ("Rss", "Anonymous"):
                found[key] = int(value.split()[0]) // 1024
    return {"anonymous": found["Anonymous"], "file-backed": found["Rss"] - found["Anonymous"]}


def served_stages(kind, path, requests):
    """The stages of a process serving the SavedModel at `path` (`kind` "text" or "ids")."""
    stages = [resident_mb()]
    import tensorflow as tf

    if kind == "text":
        import tensorflow_text  # noqa: F401  (the tokenizer's kernels, as TF Serving links them)
    stages.append(resident_mb())
    serve = tf.saved_model.load(path).signatures["serving_default"]
    stages.append(resident_mb())
    for request in requests:
        if kind == "text":
            serve(text=tf.constant(request))
        else:
            serve(**{name: tf.constant(value, tf.int32) for name, value in request.items()})
        stages.append(resident_mb())
    return stages + [mapped_mb()]


def torch_stages(folder, texts):
    """The same stages for transformers' classifier over `folder` (run in the torch Python)."""
    stages = [resident_mb()]
    import torch
    import transformers

    stages.append(resident_mb())
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder, num_labels=2).eval()
    stages.append(resident_mb())
    with torch.inference_mode():
        for batch in texts:
            model(**tokenizer(batch, padding=True, truncation=True, max_length=128, return_tensors="pt"))
            stages.append(resident_mb())
    return stages + [mapped_mb()]


def litert_stages(path, folder, texts):
    """The same stages for the ids `.tflite` at `path` in LiteRT, `folder`'s tokenizer.json read by
    the `tokenizers` library (run in the LiteRT Python: no TensorFlow there)."""
    stages = [resident_mb()]
    import numpy as np
    import tokenizers
    from ai_edge_litert.interpreter import Interpreter

    stages.append(resident_mb())
    tokenizer = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tokenizer.enable_truncation(128)
    tokenizer.enable_padding()
    runner = Interpreter(model_path=path, num_threads=os.cpu_count()).get_signature_runner("serving_default")
    stages.append(resident_mb())
    for batch in texts:
        pieces = tokenizer.encode_batch(batch)
        logits = runner(
            token_ids=np.array([p.ids for p in pieces], np.int32),
            segment_ids=np.array([p.type_ids for p in pieces], np.int32),
            padding_mask=np.array([p.attention_mask for p in pieces], np.int32),
        )["logits"]
        stages.append(resident_mb())
    return {"stages": stages + [mapped_mb()], "logits": logits.tolist()}  # the last batch's, checked against Keras


def export_minilm(directory):
    """The real MiniLM with a 2-class head, exported text-in and ids-in; (paths, requests)."""
    sys.path.insert(0, REPO)
    from bertlayers.tasks import TextClassifier
    from bertlayers.utils.assets import minilm_path, rotten_tomatoes_snippets

    texts = [text for text, _ in rotten_tomatoes_snippets()[:32]]
    classifier = TextClassifier.from_checkpoint(minilm_path(), labels=["rotten", "fresh"], sequence_length=128)
    paths = classifier.export(directory, "minilm")
    batches = [texts[:1], texts]
    inputs = [classifier.inputs(batch) for batch in batches]
    ids = [{name: value.tolist() for name, value in x.items()} for x in inputs]
    keras_logits = classifier.model.predict(inputs[-1], verbose=0)["logits"]
    from bertlayers.export import export_tflite

    lite = {
        f"tflite {precision}": export_tflite(
            paths["minilm"], os.path.join(directory, f"minilm_{precision}.tflite"), int8=precision == "int8"
        )
        for precision in ("float32", "int8")
    }
    paths = {"text": paths["minilm_text"], "ids": paths["minilm"], **lite}
    return paths, {"text": batches, "ids": ids}, minilm_path(), keras_logits


def child(arguments, environment=None, python=sys.executable):
    """Run this script's `--child` in a fresh Python; its stages."""
    command = [python, os.path.abspath(__file__), "--child", json.dumps(arguments)]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(environment or {})}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--torch_python", help="a Python with torch and transformers, for the peer's row")
    parser.add_argument("--litert_python", help="a Python with ai-edge-litert and tokenizers, for the TFLite rows")
    parser.add_argument("--rounds", type=int, default=2, help="fresh processes a row (the median is printed)")
    parser.add_argument("--output", help="also write the rows as JSON here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        work = json.loads(args.child)
        if work["kind"] == "torch":
            print(json.dumps(torch_stages(work["folder"], work["requests"])))
        elif work["kind"] == "litert":
            print(json.dumps(litert_stages(work["path"], work["folder"], work["requests"])))
        else:
            print(json.dumps(served_stages(work["kind"], work["path"], work["requests"])))
        return
    with tempfile.TemporaryDirectory() as directory:
        paths, requests, folder, keras_logits = export_minilm(directory)
        rows = {}
        for name, (kind, environment) in LEVERS.items():
            work = {"kind": kind, "path": paths[kind], "requests": requests[kind]}
            rows[name] = [child(work, environment) for _ in range(args.rounds)]
            print_row(name, rows[name])
        if args.torch_python:
            work = {"kind": "torch", "folder": folder, "requests": requests["text"]}
            rows["transformers"] = [child(work, python=args.torch_python) for _ in range(args.rounds)]
            print_row("transformers", rows["transformers"])
        if args.litert_python:
            import numpy as np  # here, not at the top: a child's first stage is a bare interpreter

            for name in ("tflite float32", "tflite int8"):
                work = {"kind": "litert", "path": paths[name], "folder": folder, "requests": requests["text"]}
                answers = [child(work, python=args.litert_python) for _ in range(args.rounds)]
                rows[f"{name}, LiteRT"] = [answer["stages"] for answer in answers]
                print_row(f"{name}, LiteRT", rows[f"{name}, LiteRT"])
                # The process must answer what the model computes: its own tokenization, LiteRT's kernels.
                logits = np.array(answers[0]["logits"])
                print(
                    f"{'':16s} the 32 reviews' logits within {np.abs(logits - keras_logits).max():.4f} of Keras's, "
                    f"the same label for {100 * np.mean(logits.argmax(-1) == keras_logits.argmax(-1)):.0f}%",
                    flush=True,
                )
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"stages": STAGES, "rows": rows}, f, indent=1)


def print_row(name, rounds):
    """One line: each stage's resident MB (the round of the median peak), the peak, and what the
    last stage's resident memory is made of."""
    middle = sorted(rounds, key=lambda stages: stages[-2][1])[len(rounds) // 2]
    cells = ", ".join(f"{stage} {rss}" for stage, (rss, _) in zip(STAGES, middle))
    parts = ", ".join(f"{part} {mb}" for part, mb in middle[-1].items())
    print(f"{name:16s} {cells}; peak {middle[-2][1]} MB ({parts})", flush=True)


if __name__ == "__main__":
    main()

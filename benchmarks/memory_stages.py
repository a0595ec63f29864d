"""Where fine-tuning's peak memory goes: the resident memory (VmRSS) after each stage of fine-tuning
the real MiniLM (all-MiniLM-L6-v2) in float32, and the peak so far (VmHWM), for bertlayers
(TensorFlow) and, with `--torch_python`, transformers (torch), each in its own process:

  python      the interpreter alone
  runtime     the framework imported (TensorFlow, Keras and bertlayers; torch and transformers)
  loaded      the checkpoint loaded as a classifier
  optimizer   AdamW's slots built (torch: created; its slots appear at the first step)
  step N      after the Nth training step of 32 x 40 random ids (bertlayers: `train_on_batch`,
              the first one tracing its function)

    python benchmarks/memory_stages.py --torch_python /path/to/torch/venv/bin/python
    python benchmarks/memory_stages.py --model bert_base   # a BERT-base-size folder of random weights
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
STEPS = 3


def resident_mb():
    """[resident MB now (VmRSS), the process's peak so far (VmHWM)]."""
    found = {}
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(("VmRSS", "VmHWM")):
                found[line[:5]] = int(line.split()[1]) // 1024
    return [found.get("VmRSS", 0), found.get("VmHWM", 0)]


def batch():
    import numpy as np

    rng = np.random.default_rng(0)
    return rng.integers(1000, 30000, (32, 40)).astype("int32"), rng.integers(0, 2, 32)


def bertlayers_stages(folder):
    stages = [("python", resident_mb())]
    sys.path.insert(0, REPO)
    import bertlayers  # noqa: F401 - first: the runtime as users get it

    # isort: split
    import keras
    import numpy as np

    from bertlayers.convert import load_checkpoint
    from bertlayers.models import SequenceClassifier
    from bertlayers.training import create_optimizer

    stages.append(("runtime", resident_mb()))
    model = SequenceClassifier(load_checkpoint(folder).encoder, 2)
    stages.append(("loaded", resident_mb()))
    optimizer = create_optimizer(2e-5, 100, 10)
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    optimizer.build(model.trainable_variables)
    stages.append(("optimizer", resident_mb()))
    ids, labels = batch()
    inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}
    for step in range(STEPS):
        model.train_on_batch(inputs, labels)
        stages.append((f"step {step + 1}", resident_mb()))
    return stages


def torch_stages(folder):
    stages = [("python", resident_mb())]
    import torch
    import transformers

    stages.append(("runtime", resident_mb()))
    model = transformers.BertForSequenceClassification.from_pretrained(folder, num_labels=2)
    stages.append(("loaded", resident_mb()))
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    stages.append(("optimizer", resident_mb()))
    ids, labels = (torch.from_numpy(array).long() for array in batch())
    for step in range(STEPS):
        model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        stages.append((f"step {step + 1}", resident_mb()))
    return stages


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--torch_python", help="the Python that has torch and transformers")
    parser.add_argument(
        "--model",
        choices=("minilm", "bert_base"),
        default="minilm",
        help="the real MiniLM folder, or a BERT-base-size one of random weights (MiniLM's vocabulary) written first",
    )
    parser.add_argument("--worker", nargs=2, metavar=("LIBRARY", "FOLDER"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.worker:
        library, folder = arguments.worker
        return print(json.dumps((bertlayers_stages if library == "bertlayers" else torch_stages)(folder)))
    sys.path.insert(0, REPO)
    from bertlayers.utils.assets import minilm_path

    with tempfile.TemporaryDirectory() as scratch:
        folder = minilm_path() if arguments.model == "minilm" else bert_base_folder(os.path.join(scratch, "bert_base"))
        print_stages(folder, {"bertlayers": sys.executable, "transformers": arguments.torch_python})


def bert_base_folder(folder):
    """A Hugging Face folder of a BERT-base-size encoder with random weights and MiniLM's vocabulary."""
    from bertlayers.convert import record_tokenizer, save_huggingface
    from bertlayers.convert.loading import tokenizer_of
    from bertlayers.families.bert import BertEncoder
    from bertlayers.utils.assets import minilm_path

    encoder = record_tokenizer(BertEncoder.from_preset("bert_base"), tokenizer_of(minilm_path()))
    return save_huggingface(encoder, folder)


def print_stages(folder, runs):
    """Each library's stages on `folder`, each in its own process, as a Markdown table."""
    results = {}
    for library, python in runs.items():
        if python is None:
            continue
        done = subprocess.run(
            [python, os.path.abspath(__file__), "--worker", library, folder], capture_output=True, text=True
        )
        if done.returncode:
            raise SystemExit(f"{library} failed:\n{done.stderr[-2000:]}")
        results[library] = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    names = list(next(iter(results.values())))
    print(
        "| stage | "
        + " | ".join(f"{library} MB (+ over the stage before; the peak so far)" for library in results)
        + " |"
    )
    print("|---|" + "---|" * len(results))
    for index, name in enumerate(names):
        cells = []
        for stages in results.values():
            values = list(stages.values())
            (now, peak), before = values[index], values[index - 1][0]
            cells.append(f"{now:,}" + (f" (+{now - before:,}; peak {peak:,})" if index else ""))
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

"""LoRA against full fine-tuning: examples/run_classifier.py on Rotten Tomatoes from the real
all-MiniLM-L6-v2, the same examples, steps and seeds, each run in its own process.

    python examples/prepare_datasets.py  # data/rotten_tomatoes/{train,test}.csv
    python benchmarks/lora_study.py --output benchmarks/lora_study.json

Prints one row a configuration (accuracy on the test file, mean and min-max over the seeds; the
weights trained; the adapter file's size against model.keras's), and writes them as JSON.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = {
    # Hu et al.'s RoBERTa-base settings: rank 8 (alpha 8) on query and value, a rate of 5e-4.
    "full fine-tuning (lr 5e-5)": [],
    "LoRA r=8 on query, value (lr 5e-4)": ["--lora_rank", "8", "--learning_rate", "5e-4"],
    "LoRA r=8 on all projections (lr 5e-4)": ["--lora_rank", "8", "--lora_targets", "all", "--learning_rate", "5e-4"],
    "LoRA r=4 on query, value (lr 5e-4)": ["--lora_rank", "4", "--learning_rate", "5e-4"],
    "LoRA r=8 on attention_output, feed_forward (lr 5e-4)": [
        *("--lora_rank", "8", "--lora_targets", "attention_output,feed_forward", "--learning_rate", "5e-4"),
    ],
}


def run(name, extra, seed, args, folder):
    output = os.path.join(folder, f"{len(os.listdir(folder))}")
    command = [
        sys.executable,
        os.path.join(REPO, "examples", "run_classifier.py"),
        *("--train_file", args.train_file, "--eval_file", args.eval_file, "--output_dir", output),
        *("--max_train_examples", str(args.max_train_examples), "--epochs", str(args.epochs)),
        *("--sequence_length", str(args.sequence_length), "--seed", str(seed), "--verbose", "0"),
        *extra,
    ]
    started = time.time()
    subprocess.run(command, check=True, capture_output=True, text=True)
    metrics = json.load(open(os.path.join(output, "metrics.json")))
    adapter = os.path.join(output, "lora_adapter.safetensors")
    return {
        "config": name,
        "seed": seed,
        "accuracy": metrics["accuracy"],
        "seconds": time.time() - started,
        "model_bytes": os.path.getsize(os.path.join(output, "model.keras")),
        "adapter_bytes": os.path.getsize(adapter) if os.path.exists(adapter) else None,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train_file", default=os.path.join(REPO, "data", "rotten_tomatoes", "train.csv"))
    parser.add_argument("--eval_file", default=os.path.join(REPO, "data", "rotten_tomatoes", "test.csv"))
    parser.add_argument("--max_train_examples", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--sequence_length", type=int, default=64)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--only", nargs="+", help="run the configurations whose names contain one of these")
    parser.add_argument("--output", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    rows = []
    configs = {n: e for n, e in CONFIGS.items() if not args.only or any(part in n for part in args.only)}
    with tempfile.TemporaryDirectory() as folder:
        for name, extra in configs.items():
            for seed in args.seeds:
                rows.append(run(name, extra, seed, args, folder))
                print(json.dumps(rows[-1]), flush=True)
    print(
        f"\n| configuration | test accuracy (mean, min-max over {len(args.seeds)} seeds) | adapter file / model.keras |"
    )
    print("|---|---|---|")
    for name in configs:
        mine = [row for row in rows if row["config"] == name]
        accuracy = [row["accuracy"] for row in mine]
        share = mine[0]["adapter_bytes"] and f"{100 * mine[0]['adapter_bytes'] / mine[0]['model_bytes']:.2f}%"
        print(
            f"| {name} | {statistics.mean(accuracy):.3f} ({min(accuracy):.3f}-{max(accuracy):.3f}) | {share or '-'} |"
        )
    if args.output:
        with open(args.output, "w") as f:
            settings = {k: os.path.relpath(v, REPO) if k.endswith("_file") else v for k, v in vars(args).items()}
            json.dump({"settings": settings, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

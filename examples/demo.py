"""The whole chain on real assets: pretrain → fine-tune → export → serve (`make demo`).

    python examples/demo.py [--workdir runs/demo] [--base_dir savedmodels]

1. Pretrain a tiny BERT (L2/H128, masked LM + next-sentence) on the real Wikipedia excerpt.
2. Fine-tune the real all-MiniLM-L6-v2 on real Rotten Tomatoes snippets (sentiment).
3. Export both for TF Serving (token ids in, and raw text in).
4. Answer a REST request with the exported sentiment text model, loaded in a fresh process with
   TensorFlow alone (no Keras, no bertlayers), and print the request and the response.

Each step runs the example script a user would run, and is skipped or resumed when its output
exists already: a second run reuses the first's work.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REVIEWS = ["A gorgeous, witty, seductive movie.", "The plot is paper-thin and the jokes fall flat."]


class Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The docstring as written and every default shown, as bertlayers.utils.cli's (this script
    does not import bertlayers)."""


def run(script, *args, quiet_stderr=False, env=None):
    """Run an example script; with `quiet_stderr` its stderr is shown only if it fails (the
    serving client imports TensorFlow alone, without bertlayers' quiet start-up)."""
    command = [sys.executable, os.path.join(HERE, script), *map(str, args)]
    result = subprocess.run(command, stderr=subprocess.PIPE if quiet_stderr else None, text=True, env=env)
    if result.returncode:
        sys.stderr.write(result.stderr or "")
        raise SystemExit(f"{script} failed (exit {result.returncode}): {' '.join(command)}")


def fingerprint(source):
    """What an export was made from: the sha256 of a .keras file's members (its config, weights and
    vocabulary; not metadata.json's save date: a finished run saves its files again), or of a run
    folder's .keras files."""
    files = [source] if os.path.isfile(source) else sorted(
        os.path.join(source, n) for n in os.listdir(source) if n.endswith(".keras")
    )  # fmt: skip
    digest = hashlib.sha256()
    for path in files:
        with zipfile.ZipFile(path) as archive:
            for member in sorted(archive.namelist()):
                if member != "metadata.json":
                    digest.update(f"{os.path.basename(path)}/{member}".encode())
                    digest.update(archive.read(member))
    return digest.hexdigest()


def newest_version(model_dir):
    return (
        max((int(n) for n in os.listdir(model_dir) if n.isdigit()), default=None) if os.path.isdir(model_dir) else None
    )


def step(number, title):
    print(f"\n=== {number}. {title} ===", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=Help, allow_abbrev=False)
    parser.add_argument("--workdir", default="runs/demo", help="where the pretraining and fine-tuning runs go")
    parser.add_argument("--data_dir", default="data", help="where prepare_datasets.py writes the real datasets")
    parser.add_argument("--base_dir", default="savedmodels", help="where the SavedModels go (TF Serving layout)")
    parser.add_argument("--pretrain_steps", type=int, default=200, help="steps of the tiny BERT's pretraining")
    parser.add_argument("--train_examples", type=int, default=1600, help="Rotten Tomatoes snippets to fine-tune on")
    args = parser.parse_args()
    started = time.time()
    pretrain_dir = os.path.join(args.workdir, "pretrain")
    sentiment_dir = os.path.join(args.workdir, "sentiment")
    reviews = os.path.join(args.data_dir, "rotten_tomatoes")

    step(1, f"Pretrain a tiny BERT on the real Wikipedia excerpt → {pretrain_dir}")
    run(
        "pretrain.py", "--output_dir", pretrain_dir, "--num_train_steps", args.pretrain_steps, "--checkpoint_every", 100
    )

    step(2, f"Fine-tune the real all-MiniLM-L6-v2 on Rotten Tomatoes → {sentiment_dir}")
    if not os.path.isfile(os.path.join(reviews, "train.csv")):
        run("prepare_datasets.py", "--output_dir", args.data_dir)
    metrics_path = os.path.join(sentiment_dir, "metrics.json")
    if os.path.isfile(metrics_path) and os.path.isfile(os.path.join(sentiment_dir, "model.keras")):
        print(f"Reusing the fine-tuned model in {sentiment_dir} (delete it to train again)")
    else:
        run(
            "run_classifier.py",
            "--train_file",
            os.path.join(reviews, "train.csv"),
            "--eval_file",
            os.path.join(reviews, "dev.csv"),
            "--output_dir",
            sentiment_dir,
            "--max_train_examples",
            args.train_examples,
            "--epochs",
            1,
            "--sequence_length",
            48,
            "--batch_size",
            16,
            "--learning_rate",
            1e-4,
            "--overwrite",  # an interrupted run starts again
        )
    with open(metrics_path, encoding="utf-8") as f:
        metrics = json.load(f)
    print(
        f"Sentiment accuracy on {metrics['eval_examples']} held-out snippets: {metrics['accuracy']:.1%} "
        f"(majority class: {metrics.get('majority_class_accuracy', float('nan')):.1%})"
    )

    step(3, f"Export both for TF Serving → {args.base_dir}")
    # Which version of each name this demo exported, from which model: another export under the same
    # name (the README's, the serving guide's) is never taken for this run's.
    record_path = os.path.join(args.workdir, "exports.json")
    exports = json.load(open(record_path, encoding="utf-8")) if os.path.isfile(record_path) else {}
    for name, source, length in (
        ("tiny_bert", pretrain_dir, 128),
        ("sentiment", os.path.join(sentiment_dir, "model.keras"), 48),
    ):
        mine, made_from = exports.get(name, {}), fingerprint(source)
        version = mine.get("version")
        if (
            mine.get("base_dir") == os.path.abspath(args.base_dir)
            and mine.get("fingerprint") == made_from
            and all(
                os.path.isfile(os.path.join(args.base_dir, n, str(version), "saved_model.pb"))
                for n in (name, f"{name}_text")
            )
        ):
            print(
                f"Reusing this demo's export {os.path.join(args.base_dir, name)}(_text)/{version} (delete it to export again)"
            )
            continue
        run(
            "export_savedmodel.py",
            "--model",
            source,
            "--name",
            name,
            "--base_dir",
            args.base_dir,
            "--sequence_length",
            length,
        )
        version = newest_version(os.path.join(args.base_dir, f"{name}_text"))
        exports[name] = {"base_dir": os.path.abspath(args.base_dir), "version": version, "fingerprint": made_from}
        with open(record_path + ".partial", "w", encoding="utf-8") as f:
            json.dump(exports, f, indent=1)
        os.replace(record_path + ".partial", record_path)

    step(4, "Serve: a REST request to the sentiment text model, answered in a fresh process without Keras")
    # As in a server: Keras and bertlayers cannot even be imported in this process.
    unavailable = os.path.join(args.workdir, "without_keras")
    for package in ("keras", "keras_hub", "keras_nlp", "bertlayers"):
        os.makedirs(os.path.join(unavailable, package), exist_ok=True)
        with open(os.path.join(unavailable, package, "__init__.py"), "w", encoding="utf-8") as f:
            f.write(f"raise ImportError('{package} is not available in the serving process')\n")
    command = [
        "serving_requests.py",
        "--base_dir",
        args.base_dir,
        "--name",
        "sentiment",
        "--text_only",
        "--signature",
        "serving_default",
        "--version",
        exports["sentiment"]["version"],
    ]
    for review in REVIEWS:
        command += ["--text", review]
    run(*command, quiet_stderr=True, env=dict(os.environ, PYTHONPATH=os.path.abspath(unavailable)))
    print(
        f"\nDone in {(time.time() - started) / 60:.1f} min. To serve for real: tensorflow_model_server --rest_api_port=8501 "
        f"--model_config_file={os.path.abspath(os.path.join(args.base_dir, 'models.local.config'))} (or in Docker: cd {args.base_dir} && docker compose up)"
    )


if __name__ == "__main__":
    main()

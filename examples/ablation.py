"""The pretraining-objective ablation (BERT's Table 5, RoBERTa's NSP study) in miniature.

One row per objective, each the same tiny architecture (--preset) pretrained for the same
steps on the same data (the real Wikipedia excerpt, the real bert-base-uncased vocabulary),
then fine-tuned with the same budget on Rotten Tomatoes sentiment and on the bundled
SQuAD-format file, over several fine-tuning seeds; plus a row without pretraining (the same
architecture, random weights). Every step is one of the example scripts run as a
subprocess; a step whose output exists is not run again, so a killed ablation resumes.

Writes ablation.json, ablation.md (the table) and, with matplotlib installed,
ablation.png under --output_dir. Run time on 2 CPU cores: 6 to 24 minutes of pretraining per
row (the LTR head scores every position) plus about 7 of fine-tuning; the five-row table in
docs/papers.md took about 80 minutes.

    python examples/prepare_datasets.py                  # the Rotten Tomatoes splits
    python examples/ablation.py --output_dir runs/ablation
    python examples/ablation.py --output_dir runs/ablation --objectives bert roberta none --seeds 0 1 2
    python examples/ablation.py --output_dir runs/deberta --objectives electra deberta_v3 deberta_v3_es \\
        --tasks rotten_tomatoes --seeds 0 1 2        # DeBERTa-v3's GDES against ES and ELECTRA
    python examples/ablation.py --output_dir runs/two_stage --objectives electra electra_two_stage \\
        --tasks rotten_tomatoes --seeds 0 1 2        # ELECTRA's two-stage training against joint
    python examples/ablation.py --output_dir runs/ernie --objectives bert_whole_word ernie_entity ernie_phrase \\
        --tasks rotten_tomatoes --seeds 0 1 2        # ERNIE's entity and phrase masking
    python examples/ablation.py --output_dir runs/masking --objectives roberta_10 roberta roberta_30 roberta_40 \\
        --tasks rotten_tomatoes --seeds 0 1 2        # the masking rate (T5)
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

EXAMPLES = os.path.dirname(os.path.abspath(__file__))

# row -> (recipe, what the row tests)
OBJECTIVES = {
    "bert": ("bert", "MLM + NSP (BERT)"),
    "roberta": ("roberta", "MLM only, no NSP (RoBERTa-style)"),
    "ltr": ("ltr", "left-to-right LM, no NSP"),
    "electra": ("electra", "replaced-token detection (ELECTRA)"),
    # ELECTRA's section 3.2: the generator alone, then a copy of it as the discriminator, generator frozen.
    "electra_two_stage": ("electra", "ELECTRA trained in two stages (generator, then discriminator)"),
    "spanbert": ("spanbert", "span masking + SBO, no NSP (SpanBERT)"),
    "xlnet": ("xlnet", "permutation LM (XLNet)"),
    "modernbert": ("modernbert", "ModernBERT's architecture, masked LM at 30%, no NSP"),
    # T5's finding ("exact percent of masking/corruptions strategy doesn't matter that much"): the
    # RoBERTa-style row at other masking rates.
    "roberta_10": ("roberta", "MLM only, 10% masked"),
    "roberta_30": ("roberta", "MLM only, 30% masked"),
    "roberta_40": ("roberta", "MLM only, 40% masked"),
    # ERNIE's knowledge masking: whole entities or phrases, against whole words (the other words' unit there).
    "bert_whole_word": ("bert", "MLM + NSP, whole words masked"),
    "ernie_entity": ("bert", "MLM + NSP, named entities masked whole (ERNIE)"),
    "ernie_phrase": ("bert", "MLM + NSP, phrases masked whole (ERNIE)"),
    "deberta_v3": ("deberta_v3", "DeBERTa-v3: RTD, gradient-disentangled embedding sharing"),
    "deberta_v3_es": ("deberta_v3", "DeBERTa-v3's RTD, plain embedding sharing (ES)"),
    "none": (None, "no pretraining (random weights)"),
}
# Pretraining flags a row needs beyond the shared ones: 30% of 128 tokens is 38 masked positions.
PRETRAIN_FLAGS = {
    "modernbert": ["--max_predictions_per_seq", "38"],
    "deberta_v3_es": ["--option", "embedding_sharing=es"],
    "electra_two_stage": ["--option", "two_stage=true"],
    "bert_whole_word": ["--masking", "whole_word"],
    "ernie_entity": ["--masking", "entity"],
    "ernie_phrase": ["--masking", "phrase"],
    # The masked positions a 128-token sequence may hold must not cap the rate: ⌈rate × 128⌉.
    "roberta_10": ["--masked_lm_prob", "0.1"],
    "roberta_30": ["--masked_lm_prob", "0.3", "--max_predictions_per_seq", "39"],
    "roberta_40": ["--masked_lm_prob", "0.4", "--max_predictions_per_seq", "52"],
}
TASKS = ("rotten_tomatoes", "squad")


class Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The docstring as written and every default shown, as bertlayers.utils.cli's (this script
    does not import bertlayers)."""


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=Help, allow_abbrev=False)
    parser.add_argument(
        "--output_dir", required=True, help="where each objective's run and the summary go (reruns reuse finished runs)"
    )
    parser.add_argument(
        "--objectives",
        nargs="+",
        default=list(OBJECTIVES),
        choices=list(OBJECTIVES),
        help="the pretraining objectives to compare",
    )
    parser.add_argument("--preset", default="bert_tiny", help="the encoder's sizes")
    parser.add_argument("--num_train_steps", type=int, default=600, help="pretraining steps of every row")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="fine-tuning seeds per row and task")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS, help="the fine-tuning tasks")
    parser.add_argument("--rt_dir", default="data/rotten_tomatoes", help="prepare_datasets.py's Rotten Tomatoes splits")
    # Fixed-length training batches (--pad_to_sequence_length), pinned: every row of the table was
    # fine-tuned so, and a later change of the default must not mix paths within one table.
    parser.add_argument(
        "--rt_arguments",
        default="--epochs 3 --learning_rate 1e-4 --sequence_length 64 --pad_to_sequence_length",
        help="run_classifier.py's budget (the same for every row)",
    )
    parser.add_argument(
        "--squad_arguments",
        default="--epochs 30 --learning_rate 2e-4 --sequence_length 192 --pad_to_sequence_length",
        help="run_squad.py's budget (the same for every row)",
    )
    return parser.parse_args()


def run_step(done_file, script, *arguments):
    """Run `script` unless `done_file` exists (a finished step); return its elapsed seconds.

    Each step records its command beside its output: a finished step is reused only for the
    same command, so a rerun with another budget cannot mix old rows into the new table.
    """
    command = [script, *arguments]
    # Beside the step's folder, not in it: the runners refuse a folder that holds files of
    # another run (an interrupted run is never taken over silently).
    record = os.path.dirname(done_file) + ".ablation_step.json"
    if os.path.exists(done_file):
        recorded = read_json(record)["command"] if os.path.exists(record) else command
        if recorded != command:
            raise SystemExit(
                f"{done_file} was made by another command:\n  {' '.join(recorded)}\nnot\n  {' '.join(command)}\n"
                "Use another --output_dir, or delete that folder to redo the step."
            )
        print(f"  done already: {done_file}", flush=True)
        return None
    os.makedirs(os.path.dirname(os.path.dirname(done_file)), exist_ok=True)
    with open(record, "w", encoding="utf-8") as f:
        json.dump({"command": command}, f)
    print("  $ python examples/" + " ".join(command), flush=True)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, script), *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if result.returncode != 0:
        sys.stdout.write(result.stdout[-3000:])
        raise SystemExit(f"{script} failed (exit {result.returncode}); rerun this command to resume.")
    return time.perf_counter() - started


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def pretrained_encoder(args, row):
    """The folder (or encoder) a row fine-tunes from, and the flags that select it."""
    recipe = OBJECTIVES[row][0]
    if recipe is None:  # the architecture of the BERT row, with fresh weights
        return os.path.join(args.output_dir, "bert", "pretrain"), ["--random_init"]
    return os.path.join(args.output_dir, row, "pretrain"), []


def spread(values):
    values = np.asarray(values, dtype=float)
    return {
        "mean": float(values.mean()),
        "min": float(values.min()),
        "max": float(values.max()),
        "runs": values.tolist(),
    }


def run_row(args, row, timings):
    recipe, _ = OBJECTIVES[row]
    folder = os.path.join(args.output_dir, row)
    init, extra = pretrained_encoder(args, row)
    pretrain_recipe = recipe or "bert"
    seconds = run_step(
        os.path.join(init, "summary.json"),
        "pretrain.py",
        "--recipe",
        pretrain_recipe,
        "--preset",
        args.preset,
        "--num_train_steps",
        str(args.num_train_steps),
        "--output_dir",
        init,
        "--verbose",
        "2",
        *PRETRAIN_FLAGS.get(row, []),
    )
    if seconds is not None:
        timings[f"pretrain_{row}"] = seconds  # by row: rows may share a recipe (the masking rates)
    result = {"objective": OBJECTIVES[row][1]}
    if recipe is not None:
        summary = read_json(os.path.join(init, "summary.json"))
        key = summary["loss_key"]
        result["pretraining_loss"] = {
            "name": key,
            "first_epoch": summary[f"first_epoch_{key}"],
            "last_epoch": summary[f"last_epoch_{key}"],
        }
        if "last_epoch_rtd_accuracy" in summary:  # replaced-token detection: the discriminator's own task
            result["replaced_token_detection"] = {
                name: summary[f"last_epoch_rtd_{name}"] for name in ("accuracy", "baseline_accuracy", "auc")
            }
        result["encoder_parameters"] = summary.get("encoder_parameters")
    rt, squad = [], []
    for seed in args.seeds:
        if "rotten_tomatoes" not in args.tasks:
            break
        out = os.path.join(folder, f"rotten_tomatoes_seed{seed}")
        seconds = run_step(
            os.path.join(out, "metrics.json"),
            "run_classifier.py",
            "--train_file",
            os.path.join(args.rt_dir, "train.csv"),
            "--eval_file",
            os.path.join(args.rt_dir, "test.csv"),
            "--init",
            init,
            *extra,
            *args.rt_arguments.split(),
            "--seed",
            str(seed),
            "--output_dir",
            out,
            "--verbose",
            "2",
        )
        timings[f"{row}_rotten_tomatoes_seed{seed}"] = seconds
        rt.append(read_json(os.path.join(out, "metrics.json"))["accuracy"])
    for seed in args.seeds:
        if "squad" not in args.tasks:
            break
        out = os.path.join(folder, f"squad_seed{seed}")
        seconds = run_step(
            os.path.join(out, "metrics.json"),
            "run_squad.py",
            "--init",
            init,
            *extra,
            *args.squad_arguments.split(),
            "--seed",
            str(seed),
            "--output_dir",
            out,
            "--verbose",
            "2",
        )
        timings[f"{row}_squad_seed{seed}"] = seconds
        metrics = read_json(os.path.join(out, "metrics.json"))
        squad.append((metrics["exact_match"], metrics["f1"]))
    if rt:
        result["rotten_tomatoes_accuracy"] = spread(rt)
    if squad:
        result["squad_exact_match"] = spread([em for em, _ in squad])
        result["squad_f1"] = spread([f1 for _, f1 in squad])
    return result


def _cell(result, key, scale=1):
    if key not in result:
        return "—"
    r = result[key]
    return f"{scale * r['mean']:.1f} [{scale * r['min']:.1f}, {scale * r['max']:.1f}]"


def table(results, seeds):
    """The markdown table: a column per measure any row has (RTD and the encoder's size only where a
    row has them, each task where it ran)."""
    rows = list(results.values())
    rtd = any("replaced_token_detection" in r for r in rows)
    columns = ["objective"] + (["encoder weights"] if rtd else []) + ["pretraining loss (first → last epoch)"]
    if rtd:
        columns.append("RTD accuracy, last epoch (all-original baseline; AUC)")
    tasks = [
        (k, f"Rotten Tomatoes accuracy, mean [min, max] of {len(seeds)} seeds", 100)
        for k in ("rotten_tomatoes_accuracy",)
    ]
    tasks += [(k, name, 1) for k, name in (("squad_exact_match", "SQuAD EM"), ("squad_f1", "SQuAD F1"))]
    tasks = [task for task in tasks if any(task[0] in r for r in rows)]
    columns += [name for _, name, _ in tasks]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        loss = r.get("pretraining_loss")
        cells = [r["objective"]]
        if rtd:
            cells.append(f"{r['encoder_parameters'] / 1e6:.2f}M" if r.get("encoder_parameters") else "—")
        cells.append(f"{loss['name']} {loss['first_epoch']:.2f} → {loss['last_epoch']:.2f}" if loss else "—")
        if rtd:
            detection = r.get("replaced_token_detection")
            cells.append(
                f"{100 * detection['accuracy']:.1f}% ({100 * detection['baseline_accuracy']:.1f}%; {detection['auc']:.3f})"
                if detection
                else "—"
            )
        cells += [_cell(r, key, scale) for key, _, scale in tasks]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def chart(results, path):
    from bertlayers.utils.charts import seed_spread  # this process stays without TensorFlow until here

    panels = {
        label: {
            results[row]["objective"]: [scale * v for v in results[row][key]["runs"]]
            for row in results
            if key in results[row]
        }
        for key, label, scale in (
            ("rotten_tomatoes_accuracy", "Rotten Tomatoes accuracy (%)", 100),
            ("squad_f1", "SQuAD F1 (bundled file)", 1),
        )
    }
    panels = {label: rows for label, rows in panels.items() if rows}  # a panel for each task the study ran
    if seed_spread(panels, path, "Pretraining objectives, same tiny encoder and steps"):
        print(f"Chart: {path}")


def main():
    args = parse_args()
    os.makedirs(args.output_dir, exist_ok=True)
    # The no-pretraining row borrows the BERT row's architecture: that row's folder must exist.
    rows = args.objectives
    if "none" in rows and "bert" not in rows:
        rows = ["bert"] + rows
    results, timings = {}, {}
    started = time.perf_counter()
    for row in rows:
        print(f"[{row}] {OBJECTIVES[row][1]}", flush=True)
        results[row] = run_row(args, row, timings)
    summary = {
        "results": results,
        "seconds": timings,
        "total_seconds_this_run": time.perf_counter() - started,
        "settings": vars(args),
    }
    with open(os.path.join(args.output_dir, "ablation.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    text = table(results, args.seeds)
    with open(os.path.join(args.output_dir, "ablation.md"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    print("\n" + text)
    chart(results, os.path.join(args.output_dir, "ablation.png"))


if __name__ == "__main__":
    main()

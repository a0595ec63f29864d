"""Fine-tune one encoder on several tasks at once (MT-DNN style): a head per task, batches that mix
the tasks' examples, per-task loss weights, and each task's metrics on its own evaluation file.

    python examples/prepare_datasets.py
    python examples/run_multi_task.py --output_dir runs/multi_task \\
        --classification sentiment=data/rotten_tomatoes/train.csv,data/rotten_tomatoes/test.csv \\
        --classification topic=data/bbc_news/train.csv,data/bbc_news/test.csv \\
        --tagging entities=data/wnut16/train.conll,data/wnut16/test.conll

Classification files are CSV or JSON lines with `text` and `label` columns (run_classifier.py's);
tagging files are CoNLL (run_ner.py's). Reports accuracy (and macro F1) per classification task and
entity-level F1 per tagging task. Writes metrics.json, model.keras and TensorBoard logs to
--output_dir; examples/export_savedmodel.py serves every head from one SavedModel. `--ensemble N`
trains N such models (seeds --seed, ...) and answers each task with their mean probabilities.
"""

import argparse
import os

import _recorded_help  # noqa: F401 (answers --help before TensorFlow loads: examples/usage/)

from bertlayers.metrics import classification_metrics, entity_scores
from bertlayers.models import MultiTask, Task
from bertlayers.runs.finetuning_config import (
    add_finetuning_arguments,
    encoder_source,
    finetuning_config,
)
from bertlayers.runs.output_folder import files_written, start, write_json
from bertlayers.runs.restarts import add_ensemble_argument, finetune_restarts
from bertlayers.task_data.classification import LabelMap, encode_examples, read_text_examples
from bertlayers.task_data.multi_task import mix_tasks
from bertlayers.task_data.ner import decode_tags, encode_sentences, read_conll, tag_vocabulary
from bertlayers.training.length_batching import predict_by_length
from bertlayers.utils.cli import argument_parser, run_script
from bertlayers.utils.validation import POSITIVE_INT, flag


def task_files(value):
    """NAME=TRAIN,EVAL → (name, train path, eval path)."""
    name, _, files = value.partition("=")
    paths = files.split(",")
    if not name or len(paths) != 2 or not all(paths):
        raise argparse.ArgumentTypeError(f"expected NAME=TRAIN_FILE,EVAL_FILE, got {value!r}")
    return name, paths[0], paths[1]


def loss_weight(value):
    """NAME=WEIGHT → (name, weight)."""
    name, _, weight = value.partition("=")
    try:
        return name, float(weight)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=WEIGHT (a number), got {value!r}") from None


def main():
    parser = argument_parser(__doc__)
    parser.add_argument(
        "--classification",
        type=task_files,
        action="append",
        default=[],
        metavar="NAME=TRAIN,EVAL",
        help="a classification task and its files (repeatable)",
    )
    parser.add_argument(
        "--tagging",
        type=task_files,
        action="append",
        default=[],
        metavar="NAME=TRAIN,EVAL",
        help="a tagging task and its CoNLL files (repeatable)",
    )
    parser.add_argument(
        "--loss_weight",
        type=loss_weight,
        action="append",
        default=[],
        metavar="NAME=WEIGHT",
        help="a task's weight in the summed loss (default 1)",
    )
    parser.add_argument(
        "--max_train_examples", type=flag(POSITIVE_INT), default=None, help="train on each task's first N examples"
    )
    add_ensemble_argument(parser)
    args = add_finetuning_arguments(
        parser, sequence_length=64, epochs=2, batch_size=32, learning_rate=5e-5
    ).parse_args()
    named = [name for name, _, _ in args.classification + args.tagging]
    if not named:
        parser.error("name at least one task: --classification NAME=TRAIN,EVAL or --tagging NAME=TRAIN,EVAL")
    if len(set(named)) != len(named):
        parser.error(f"each task needs its own name; got {named}")
    weights = dict(args.loss_weight)
    if set(weights) - set(named):
        parser.error(f"--loss_weight names {sorted(set(weights) - set(named))}, which no task is (tasks: {named})")
    config = finetuning_config(parser, args)
    strategy = start(config)

    packer = config.tokenizer.packer(args.sequence_length)
    tokenizer = config.tokenizer.in_graph()
    tasks, train, evaluation = {}, {}, {}
    for name, train_file, eval_file in args.classification:
        examples, held_out = read_text_examples(train_file)[: args.max_train_examples], read_text_examples(eval_file)
        labels = LabelMap((e.label for e in examples), source=train_file)
        tasks[name] = Task("classification", label_names=labels.labels, loss_weight=weights.get(name, 1.0))
        train[name] = (encode_examples(packer, examples, train_file), labels.encode(examples), None)
        evaluation[name] = (encode_examples(packer, held_out, eval_file), labels.encode(held_out))
    for name, train_file, eval_file in args.tagging:
        sentences, held_out = read_conll(train_file)[: args.max_train_examples], read_conll(eval_file)
        tags = tag_vocabulary(sentences)
        tasks[name] = Task("tagging", label_names=tags, loss_weight=weights.get(name, 1.0))
        x, y, w, _ = encode_sentences(sentences, tokenizer, args.sequence_length, tags, train_file)
        train[name] = (x, y, w)
        x, _, _, starts = encode_sentences(held_out, tokenizer, args.sequence_length, tags, eval_file)
        evaluation[name] = (x, held_out, starts)
    counts = [f"{len(y)} {name}" for name, (_, y, _) in train.items()]
    print(", ".join(counts[:-1]) + (" and " if len(counts) > 1 else "") + counts[-1] + " training examples")

    model, ensemble = finetune_restarts(
        strategy, config, lambda encoder: MultiTask(encoder, tasks), mix_tasks(train), ensemble=args.ensemble
    )

    def task_results(model, verbose):
        results = {}
        for name, spec in tasks.items():
            logits = predict_by_length(model, evaluation[name][0], batch_size=args.batch_size, verbose=verbose)[name]
            if spec.kind == "classification":
                scores = classification_metrics(evaluation[name][1], logits.argmax(-1), list(spec.label_names))
            else:
                _, sentences, starts = evaluation[name]
                gold = [[tag for _, tag in sentence] for sentence in sentences]
                scores = entity_scores(gold, decode_tags(logits, starts, list(spec.label_names)))
            results[name] = {k: v for k, v in scores.items() if k not in ("per_class_f1", "per_type")}
        return results

    results = task_results(model, args.verbose)
    members = [task_results(member, 0) for member in getattr(model, "members", [])]  # each alone, for comparison
    write_json(
        os.path.join(config.output_dir, "metrics.json"),
        {
            "tasks": results,
            "loss_weights": {n: s.loss_weight for n, s in tasks.items()},
            "init": "random" if args.random_init else encoder_source(config),
            **ensemble,
            **({"member_tasks": members} if members else {}),
        },
    )
    for name, scores in results.items():
        print(f"{name}: " + "  ".join(f"{k} {v:.4f}" for k, v in scores.items() if isinstance(v, float)))

    print(files_written(config.output_dir))


if __name__ == "__main__":
    run_script(main)

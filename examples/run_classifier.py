"""Fine-tune a pretrained encoder for sequence classification or regression.

Data: TSV / CSV / JSONL with one or two text columns and a label column. Metrics: accuracy,
F1 and Matthews correlation for classification; Pearson and Spearman for regression.
Writes predictions.jsonl, metrics.json, model.keras and TensorBoard logs to --output_dir.

    python examples/prepare_datasets.py                 # the real Rotten Tomatoes splits
    python examples/run_classifier.py --train_file data/rotten_tomatoes/train.csv \\
        --eval_file data/rotten_tomatoes/test.csv --output_dir runs/sentiment
    python examples/run_classifier.py --train_file my.csv --validation_split 0.1 --output_dir runs/mine  # no eval file
    python examples/run_classifier.py ... --random_init  # the same encoder size, no pretraining
    python examples/run_classifier.py ... --feature_based  # frozen encoder, scalar mix + BiLSTM (ELMo style)
    python examples/run_classifier.py ... --restarts 3 --dev_file data/rotten_tomatoes/dev.csv  # the best of 3 seeds on dev
    python examples/run_classifier.py ... --ensemble 3   # 3 seeds' mean probabilities, saved and served as one model
"""

import json
import os

import _recorded_help  # noqa: F401 (answers --help before TensorFlow loads: examples/usage/)

import bertlayers  # noqa: F401 (first: TensorFlow loads as bertlayers sets it up)

# isort: split
import keras
import numpy as np

from bertlayers.metrics import accuracy, classification_metrics, pearson, spearman
from bertlayers.models import SequenceClassifier
from bertlayers.runs.finetuning_config import (
    add_feature_based_arguments,
    add_finetuning_arguments,
    add_pooling_argument,
    encoder_source,
    feature_based_options,
    finetuning_config,
    pooling_for,
)
from bertlayers.runs.output_folder import files_written, start, write_json
from bertlayers.runs.restarts import (
    add_ensemble_argument,
    add_restart_arguments,
    check_restart_arguments,
    finetune_restarts,
)
from bertlayers.task_data.classification import (
    LabelMap,
    encode_examples,
    held_out,
    read_text_examples,
    regression_targets,
)
from bertlayers.training.length_batching import predict_by_length
from bertlayers.utils.atomic_files import write_text
from bertlayers.utils.charts import ensemble_scores
from bertlayers.utils.cli import argument_parser, run_script
from bertlayers.utils.validation import POSITIVE_INT, Range, flag


def main():
    parser = argument_parser(__doc__)
    parser.add_argument("--train_file", required=True, help="CSV or JSON lines of training examples")
    parser.add_argument(
        "--eval_file",
        default=None,
        help="CSV or JSON lines of evaluation examples: scored after training, and validated on after every "
        "epoch unless --dev_file is given (or --validation_split)",
    )
    parser.add_argument(
        "--validation_split",
        type=flag(Range(float, 0, 1, low_open=True, high_open=True)),
        default=None,
        help="instead of --eval_file: hold out this fraction of the training examples (drawn with --seed) "
        "as the evaluation examples",
    )
    parser.add_argument("--text_a", default="text", help="column of the (first) text")
    parser.add_argument("--text_b", default=None, help="column of the second text, for sentence pairs")
    parser.add_argument("--label", default="label", help="label column")
    parser.add_argument("--regression", action="store_true", help="numeric labels, one output, MSE")
    parser.add_argument(
        "--vocabulary", default=None, help="vocab.txt (default: the encoder folder's, or bert-base-uncased)"
    )
    parser.add_argument(
        "--max_train_examples", type=flag(POSITIVE_INT), default=None, help="train on the file's first N examples"
    )
    add_feature_based_arguments(parser)
    add_pooling_argument(parser)
    add_restart_arguments(parser)
    add_ensemble_argument(parser)
    args = add_finetuning_arguments(parser, sequence_length=64, epochs=2).parse_args()
    check_restart_arguments(parser, args)
    if args.ensemble > 1 and args.regression:
        parser.error("--ensemble averages class probabilities; a regression has none (drop --ensemble)")
    if (args.eval_file is None) == (args.validation_split is None):
        parser.error("give one of --eval_file and --validation_split (a fraction of --train_file held out)")
    config = finetuning_config(parser, args)
    strategy = start(config)

    read = lambda path: read_text_examples(path, args.text_a, args.text_b, args.label)  # noqa: E731
    train = read(args.train_file)
    if args.max_train_examples:
        print(f"Training on the first {args.max_train_examples} of {len(train)} examples of {args.train_file}")
        train = train[: args.max_train_examples]
    if args.eval_file:
        evaluation, eval_name = read(args.eval_file), args.eval_file
    else:
        train, evaluation = held_out(train, args.validation_split, config.seed, args.train_file)
        eval_name = f"{args.train_file} (the {len(evaluation)} examples held out by --validation_split)"
    packer = config.tokenizer.packer(args.sequence_length)
    x_train, x_eval = (
        encode_examples(packer, train, args.train_file),
        encode_examples(packer, evaluation, eval_name),
    )
    if args.regression:
        y_train, y_eval = regression_targets(train), regression_targets(evaluation)
        num_classes, labels = 1, None
    else:
        labels = LabelMap((e.label for e in train), source=args.train_file)
        y_train, y_eval = labels.encode(train), labels.encode(evaluation)
        num_classes = len(labels.labels)
    print(
        f"{len(train)} training and {len(evaluation)} evaluation examples"
        + (f", labels {labels.labels}" if labels else "")
    )

    dev_score = None
    if args.dev_file:
        dev = read(args.dev_file)
        x_dev = encode_examples(packer, dev, args.dev_file)
        y_dev = regression_targets(dev)[:, 0] if args.regression else labels.encode(dev)
        validation, validated_on = (
            (x_dev, {"logits": regression_targets(dev) if args.regression else y_dev}, None),
            args.dev_file,
        )

        def dev_score(model):  # Pearson for regression, else accuracy
            logits = predict_by_length(model, x_dev, batch_size=args.batch_size, verbose=0)["logits"]
            return pearson(y_dev, logits[:, 0]) if args.regression else accuracy(y_dev, logits.argmax(-1))

    if not args.dev_file:
        # The curve and the kept epoch come from the eval file: say so (a --dev_file keeps it held out).
        validation, validated_on = (x_eval, {"logits": y_eval}, None), eval_name
        print(f"Validating on {eval_name} after every epoch (give --dev_file to keep it held out)")
    pooling = pooling_for(config, args.pooling)
    model, restarts = finetune_restarts(
        strategy,
        config,
        lambda encoder: SequenceClassifier(
            encoder,
            num_classes,
            label_names=labels.labels if labels else None,
            pooling=pooling,
            **feature_based_options(config),
        ),
        (x_train, {"logits": y_train}, None),
        dev_score,
        args.restarts,
        validation=validation,
        ensemble=args.ensemble,
    )
    logits = predict_by_length(model, x_eval, batch_size=args.batch_size, verbose=args.verbose)["logits"]
    if args.regression:
        scores = logits[:, 0]
        metrics = {"pearson": pearson(y_eval[:, 0], scores), "spearman": spearman(y_eval[:, 0], scores)}
        predictions = [{**_texts(e), "score": float(s)} for e, s in zip(evaluation, scores)]
    else:
        predicted = logits.argmax(-1)
        metrics = classification_metrics(y_eval, predicted, labels.labels)
        # The score of always answering the training data's most frequent label: what "learned" must beat.
        metrics["majority_class_accuracy"] = accuracy(y_eval, np.full_like(y_eval, np.bincount(y_train).argmax()))
        for member in getattr(model, "members", []):  # an ensemble: each member alone, for comparison
            alone = predict_by_length(member, x_eval, batch_size=args.batch_size, verbose=0)["logits"]
            metrics.setdefault("member_accuracies", []).append(accuracy(y_eval, alone.argmax(-1)))
        probabilities = keras.ops.convert_to_numpy(keras.ops.softmax(logits, axis=-1))
        predictions = [
            {
                **_texts(e),
                "label": labels.labels[p],
                "probabilities": {name: round(float(p), 6) for name, p in zip(labels.labels, row)},
            }
            for e, p, row in zip(evaluation, predicted, probabilities)
        ]
    metrics.update(
        {
            "eval_examples": len(evaluation),
            "init": "random" if args.random_init else encoder_source(config),
            "pooling": pooling,
            "validated_on": validated_on,
            **restarts,
        }
    )
    write_json(os.path.join(config.output_dir, "metrics.json"), metrics)
    if metrics.get("member_accuracies"):  # the ensemble against its members, where matplotlib is installed
        ensemble_scores(
            metrics["member_accuracies"],
            metrics["accuracy"],
            "accuracy",
            os.path.join(config.output_dir, "ensemble.png"),
        )
    write_text(os.path.join(config.output_dir, "predictions.jsonl"), "".join(json.dumps(p) + "\n" for p in predictions))
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items() if k != "per_class_f1"})
    print(files_written(config.output_dir))


def _texts(example):
    """A prediction's record of its example: where it is and its text(s)."""
    texts = {"id": example.where, "text": example.text_a}
    return {**texts, "text_b": example.text_b} if example.text_b is not None else texts


if __name__ == "__main__":
    run_script(main)

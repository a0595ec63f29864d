"""Distil a fine-tuned classifier into a compact BERT, and test the claim that distillation
beats training the small model directly (Hinton et al. 2015; the reference notes'
"distillation works much better than pre-training + fine-tuning with a smaller model").

The teacher was fine-tuned on the first --labelled_examples of the training file; the rest
of that file, labels hidden, is the unlabelled transfer text it never trained on (with
--wikipedia_sentences, real Wikipedia sentences too). On the same held-out file the script
reports: the teacher; the student trained directly on the labelled examples; the student
trained on the teacher's soft targets over labelled + transfer text; each student from random
weights and, with --student_init, from a tiny pretrained encoder. Both students of a row get
the same number of optimizer steps. Then both the teacher and the distilled student are
exported as text SavedModels and timed at batch 1. About 15 minutes on 2 CPU cores.

    python examples/run_classifier.py --train_file data/rotten_tomatoes/train.csv \\
        --eval_file data/rotten_tomatoes/test.csv --max_train_examples 2000 --output_dir runs/rt_teacher
    python examples/pretrain.py --output_dir runs/bert_tiny           # optional: a pretrained student
    python examples/distill.py --teacher runs/rt_teacher/model.keras --student_init runs/bert_tiny \\
        --output_dir runs/distill
"""

import math
import os
import time

import _recorded_help  # noqa: F401 (answers --help before TensorFlow loads: examples/usage/)

import bertlayers  # noqa: F401 (first: TensorFlow loads as bertlayers sets it up)

# isort: split
import keras
import numpy as np

from bertlayers.convert.loading import load_encoder, load_model_file
from bertlayers.export import export_for_serving
from bertlayers.export.serving_latency import load_text_ops, serving_latency
from bertlayers.families.bert import BertEncoder
from bertlayers.metrics import accuracy
from bertlayers.models import Distiller, SequenceClassifier
from bertlayers.networks import reinitialized
from bertlayers.runs.output_folder import take_output_folder, write_json
from bertlayers.task_data.classification import LabelMap, TextExample, encode_examples, read_text_examples
from bertlayers.tokenizers import model_tokenizer
from bertlayers.tokenizers.tokenizer import check_vocabulary_fits
from bertlayers.training.length_batching import predict_by_length
from bertlayers.training.optimization import create_optimizer
from bertlayers.utils.assets import bert_uncased_vocabulary
from bertlayers.utils.cli import argument_parser, run_script
from bertlayers.utils.validation import NON_NEGATIVE_INT, POSITIVE_FLOAT, POSITIVE_INT, Range, flag


def parse_args():
    parser = argument_parser(__doc__)
    parser.add_argument(
        "--teacher", required=True, help="a fine-tuned SequenceClassifier .keras (run_classifier.py's model.keras)"
    )
    parser.add_argument(
        "--train_file", default="data/rotten_tomatoes/train.csv", help="CSV of training texts (the teacher labels them)"
    )
    parser.add_argument("--eval_file", default="data/rotten_tomatoes/test.csv", help="CSV of labelled evaluation texts")
    parser.add_argument(
        "--labelled_examples",
        type=flag(POSITIVE_INT),
        default=2000,
        help="the teacher's training examples (the file's first N)",
    )
    parser.add_argument(
        "--wikipedia_sentences",
        type=flag(NON_NEGATIVE_INT),
        default=0,
        help="add N Wikipedia sentences to the transfer text",
    )
    parser.add_argument("--student_preset", default="bert_tiny", help="the student's architecture (random weights)")
    parser.add_argument("--student_init", default=None, help="also train students from this pretrained encoder")
    parser.add_argument("--vocabulary", default=None, help="vocab.txt (default bert-base-uncased's)")
    parser.add_argument("--sequence_length", type=flag(Range(int, 2)), default=64, help="pieces per text")
    parser.add_argument(
        "--temperature", type=flag(POSITIVE_FLOAT), default=2.0, help="softmax temperature of the soft targets"
    )
    parser.add_argument(
        "--soft_loss",
        default="kl",
        choices=["kl", "mse"],
        help="KL divergence to the teacher's distribution, or MSE between logits",
    )
    parser.add_argument(
        "--epochs", type=flag(POSITIVE_INT), default=4, help="passes of the distilled student over the transfer text"
    )
    parser.add_argument("--batch_size", type=flag(POSITIVE_INT), default=32, help="examples per step")
    parser.add_argument(
        "--learning_rate", type=flag(POSITIVE_FLOAT), default=5e-4, help="the student's peak learning rate"
    )
    parser.add_argument(
        "--latency_requests", type=flag(NON_NEGATIVE_INT), default=200, help="single requests timed per model (0: none)"
    )
    parser.add_argument("--output_dir", required=True, help="where the students, metrics and exports go")
    parser.add_argument("--overwrite", action="store_true", help="replace the run already in --output_dir")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data order and the students' weights")
    parser.add_argument(
        "--verbose", type=flag(Range(int, 0, 2)), default=2, help="0 silent, 1 progress bar, 2 one line per epoch"
    )
    return parser.parse_args()


def wikipedia_sentences(count):
    from bertlayers.pretraining_data.corpus import read_wikipedia_dump, wikipedia_excerpt_path

    sentences = [
        s for document in read_wikipedia_dump(wikipedia_excerpt_path()) for s in document if len(s.split()) >= 5
    ]
    return sentences[:count]


def accuracy_of(model, x, y, batch_size):
    return accuracy(y, predict_by_length(model, x, batch_size=batch_size, verbose=0)["logits"].argmax(-1))


def parameter_count(model):
    """Weights that serve: the encoder (pooler included) and the head."""
    return int(sum(np.prod(w.shape) for w in model.weights))


def train(model, x, y, steps_per_epoch, epochs, args):
    """`fit` with the library's AdamW schedule over exactly `epochs * steps_per_epoch` steps."""
    total = epochs * steps_per_epoch
    model.compile(optimizer=create_optimizer(args.learning_rate, total, int(0.1 * total)))
    started = time.perf_counter()
    model.fit(x, y, batch_size=args.batch_size, epochs=epochs, shuffle=True, verbose=args.verbose)
    return time.perf_counter() - started


def main():
    args = parse_args()
    keras.utils.set_random_seed(args.seed)
    take_output_folder(args.output_dir, "distillation run in", overwrite=args.overwrite)
    teacher = load_model_file(args.teacher)
    if not isinstance(teacher, SequenceClassifier):
        raise ValueError(f"{args.teacher} holds a {type(teacher).__name__}; the teacher must be a SequenceClassifier.")
    vocabulary = args.vocabulary or bert_uncased_vocabulary()
    check_vocabulary_fits(vocabulary, teacher.encoder.config.vocabulary_size, source=vocabulary)
    packer = model_tokenizer(vocabulary).packer(args.sequence_length)

    examples = read_text_examples(args.train_file)
    labelled, transfer = examples[: args.labelled_examples], examples[args.labelled_examples :]
    if args.wikipedia_sentences:
        transfer += [
            TextExample(f"wikipedia:{i}", s) for i, s in enumerate(wikipedia_sentences(args.wikipedia_sentences))
        ]
    evaluation = read_text_examples(args.eval_file)
    labels = LabelMap(teacher.label_names or (e.label for e in labelled), source=args.train_file)
    print(f"{len(labelled)} labelled examples, {len(transfer)} unlabelled transfer texts, {len(evaluation)} held out")
    x_labelled = encode_examples(packer, labelled, args.train_file)
    x_all = encode_examples(packer, labelled + transfer, "the transfer text")
    x_eval = encode_examples(packer, evaluation, args.eval_file)
    y_labelled, y_eval = labels.encode(labelled), labels.encode(evaluation)

    print("The teacher labels the transfer text (soft targets, computed once)")
    soft_targets = predict_by_length(teacher, x_all, batch_size=64, verbose=1)["logits"]
    results = {
        "teacher": {"accuracy": accuracy_of(teacher, x_eval, y_eval, 64), "parameters": parameter_count(teacher)}
    }
    print(f"teacher: accuracy {results['teacher']['accuracy']:.4f}")

    base = BertEncoder.from_preset(args.student_preset)
    inits = {"random": lambda: reinitialized(base, seed=args.seed)}
    if args.student_init:
        inits["pretrained"] = lambda: load_encoder(args.student_init)
    steps_per_epoch = math.ceil(len(x_all["token_ids"]) / args.batch_size)
    direct_epochs = max(1, round(args.epochs * steps_per_epoch / math.ceil(len(y_labelled) / args.batch_size)))
    students = {}
    for init, make_encoder in inits.items():
        direct = SequenceClassifier(make_encoder(), len(labels.labels), label_names=labels.labels)
        seconds = train(
            direct,
            x_labelled,
            {"logits": y_labelled},
            math.ceil(len(y_labelled) / args.batch_size),
            direct_epochs,
            args,
        )
        results[f"direct_{init}"] = {
            "accuracy": accuracy_of(direct, x_eval, y_eval, 64),
            "train_seconds": seconds,
            "epochs": direct_epochs,
            "parameters": parameter_count(direct),
        }
        student = SequenceClassifier(make_encoder(), len(labels.labels), label_names=labels.labels)
        distiller = Distiller(student, temperature=args.temperature, soft_loss=args.soft_loss)
        seconds = train(distiller, x_all, {"teacher_logits": soft_targets}, steps_per_epoch, args.epochs, args)
        results[f"distilled_{init}"] = {
            "accuracy": accuracy_of(student, x_eval, y_eval, 64),
            "train_seconds": seconds,
            "epochs": args.epochs,
            "parameters": parameter_count(student),
        }
        students[init] = student
        for name in (f"direct_{init}", f"distilled_{init}"):
            print(
                f"{name}: accuracy {results[name]['accuracy']:.4f} ({results[name]['epochs']} epochs, "
                f"{results[name]['train_seconds']:.0f} s)"
            )

    results["settings"] = vars(args)
    metrics_path = os.path.join(args.output_dir, "metrics.json")
    write_json(metrics_path, results)  # the accuracies, before the exports and their timing

    # Batch-1 latency of the served text models: the teacher and the last distilled student
    # (the students of every row share one architecture). They truncate as the evaluation above did.
    if args.latency_requests:
        load_text_ops()
        texts = [e.text_a for e in evaluation]
        exports = os.path.join(args.output_dir, "savedmodels")
        for name, model in (("teacher", teacher), ("student", student)):
            paths = export_for_serving(
                model,
                name,
                base_dir=exports,
                vocabulary=vocabulary,
                sequence_length=args.sequence_length,
                truncate=True,
            )
            p50, p99, _ = serving_latency(
                paths[f"{name}_text"], texts, requests=args.latency_requests, batch_size=32, rounds=0
            )
            results[name if name == "teacher" else f"distilled_{init}"].update(
                {"batch1_p50_ms": p50, "batch1_p99_ms": p99}
            )
        write_json(metrics_path, results)

    print("\n| model | parameters | held-out accuracy | batch-1 p50 ms (SavedModel, text in) |\n|---|---|---|---|")
    for name, row in results.items():
        if name != "settings":
            latency = f"{row['batch1_p50_ms']:.2f}" if "batch1_p50_ms" in row else ""
            print(f"| {name} | {row['parameters'] / 1e6:.2f}M | {row['accuracy']:.4f} | {latency} |")


if __name__ == "__main__":
    run_script(main)

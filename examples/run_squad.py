"""Fine-tune a pretrained encoder for extractive question answering (SQuAD v1.1 / v2.0).

Long contexts are split into windows (`--doc_stride`, `--max_query_length`); answers are decoded
from the n-best start/end pairs (`--n_best_size`, `--max_answer_length`) and cut from the
original context by character offsets; for v2.0 the null answer wins by
`--null_score_diff_threshold`. Scores use the official exact-match and F1 definitions.
Writes predictions.json, nbest_predictions.json, metrics.json, model.keras and TensorBoard logs.

    python examples/run_squad.py --output_dir runs/squad                      # the bundled file, v1.1
    python examples/run_squad.py --output_dir runs/squad2 --version_2_with_negative
    python examples/run_squad.py --output_dir runs/squad3 --ensemble 3   # 3 seeds' mean start/end probabilities
"""

import os

import _recorded_help  # noqa: F401 (answers --help before TensorFlow loads: examples/usage/)

from bertlayers.metrics import squad_scores
from bertlayers.models import SpanPredictor
from bertlayers.runs.finetuning_config import add_finetuning_arguments, encoder_source, finetuning_config
from bertlayers.runs.output_folder import files_written, start, write_json
from bertlayers.runs.restarts import add_ensemble_argument, finetune_restarts
from bertlayers.task_data.squad import decode_answers, make_windows, read_squad
from bertlayers.training.length_batching import predict_by_length
from bertlayers.utils.cli import argument_parser, run_script
from bertlayers.utils.validation import POSITIVE_INT, Range, flag

BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "squad_mini")


def main():
    parser = argument_parser(__doc__)
    parser.add_argument(
        "--train_file",
        default=None,
        help="SQuAD JSON to train on (none: the bundled examples/data/squad_mini/train-v2.0.json)",
    )
    parser.add_argument(
        "--predict_file",
        default=None,
        help="SQuAD JSON to predict and score (none: the bundled examples/data/squad_mini/dev-v2.0.json)",
    )
    parser.add_argument(
        "--version_2_with_negative", action="store_true", help="SQuAD 2.0: questions may have no answer"
    )
    parser.add_argument(
        "--doc_stride",
        type=flag(POSITIVE_INT),
        default=64,
        help="pieces between the starts of a long context's windows",
    )
    parser.add_argument("--max_query_length", type=flag(POSITIVE_INT), default=32, help="the question's most pieces")
    parser.add_argument("--max_answer_length", type=flag(POSITIVE_INT), default=30, help="the answer's most pieces")
    parser.add_argument(
        "--n_best_size", type=flag(POSITIVE_INT), default=20, help="start and end candidates per window"
    )
    parser.add_argument(
        "--null_score_diff_threshold",
        type=flag(Range(float)),
        default=0.0,
        help="SQuAD 2.0: answer 'no answer' when its score beats the best span by more",
    )
    parser.add_argument(
        "--vocabulary",
        default=None,
        help="vocab.txt (default: the one recorded with the encoder, else bert-base-uncased)",
    )
    add_ensemble_argument(parser)
    args = add_finetuning_arguments(
        parser, sequence_length=192, epochs=30, batch_size=8, learning_rate=2e-4
    ).parse_args()
    args.train_file = args.train_file or os.path.join(BUNDLED, "train-v2.0.json")
    args.predict_file = args.predict_file or os.path.join(BUNDLED, "dev-v2.0.json")
    config = finetuning_config(parser, args)
    strategy = start(config)

    train, evaluation = read_squad(args.train_file), read_squad(args.predict_file)
    if not args.version_2_with_negative:
        for name, examples in (("training", train), ("evaluation", evaluation)):
            dropped = sum(e.is_impossible for e in examples)
            if dropped:
                print(
                    f"SQuAD v1.1: leaving out {dropped} unanswerable {name} questions (use --version_2_with_negative)"
                )
        train = [e for e in train if not e.is_impossible]
        evaluation = [e for e in evaluation if not e.is_impossible]
        for path, examples in ((args.train_file, train), (args.predict_file, evaluation)):
            if not examples:
                raise ValueError(
                    f"{path} holds only unanswerable questions; SQuAD v1.1 mode leaves none "
                    f"(use --version_2_with_negative)."
                )
    vocabulary = config.tokenizer
    tokenizer = vocabulary.in_graph()
    window = dict(
        sequence_length=args.sequence_length,
        doc_stride=args.doc_stride,
        max_query_length=args.max_query_length,
    )
    train_features = make_windows(train, tokenizer, **window)
    eval_features = make_windows(evaluation, tokenizer, **window)
    print(
        f"{len(train)} training questions ({len(train_features.example_index)} windows), "
        f"{len(evaluation)} evaluation questions ({len(eval_features.example_index)} windows)"
    )

    targets = {"start_logits": train_features.start_positions, "end_logits": train_features.end_positions}
    model, ensemble = finetune_restarts(
        strategy, config, SpanPredictor, (train_features.inputs, targets, None), ensemble=args.ensemble
    )
    gold = {e.qid: [text for text, _ in e.answers] for e in evaluation}

    def answers(model, verbose):
        outputs = predict_by_length(model, eval_features.inputs, batch_size=args.batch_size, verbose=verbose)
        predictions, nbest = decode_answers(
            evaluation,
            eval_features,
            outputs["start_logits"],
            outputs["end_logits"],
            n_best_size=args.n_best_size,
            max_answer_length=args.max_answer_length,
            version_2=args.version_2_with_negative,
            null_score_diff_threshold=args.null_score_diff_threshold,
        )
        return predictions, nbest, squad_scores(predictions, gold)

    predictions, nbest, metrics = answers(model, args.verbose)
    for member in getattr(model, "members", []):  # an ensemble: each member alone, for comparison
        alone = answers(member, 0)[2]
        for name in ("exact_match", "f1"):
            metrics.setdefault(f"member_{name}", []).append(alone[name])
    metrics["init"] = "random" if args.random_init else encoder_source(config)
    metrics.update(ensemble)
    write_json(os.path.join(config.output_dir, "predictions.json"), predictions)
    write_json(os.path.join(config.output_dir, "nbest_predictions.json"), nbest)
    write_json(os.path.join(config.output_dir, "metrics.json"), metrics)
    print({k: round(v, 2) if isinstance(v, float) else v for k, v in metrics.items()})

    print(files_written(config.output_dir))


if __name__ == "__main__":
    run_script(main)

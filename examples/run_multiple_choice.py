"""Fine-tune a pretrained encoder for multiple choice: each (context, choice) pair scored, a softmax
over the choices (SWAG-style). Files are JSON lines of {"context", "choices", "label"}.

    python examples/prepare_datasets.py      # data/wiki_next_sentence: the Wikipedia excerpt's next-sentence choices
    python examples/run_multiple_choice.py --train_file data/wiki_next_sentence/train.jsonl \\
        --eval_file data/wiki_next_sentence/dev.jsonl --output_dir runs/choice
    python examples/run_multiple_choice.py ... --ensemble 3   # 3 seeds' mean choice probabilities

Reports accuracy beside chance (1 / choices) and beside the starting encoder untuned: the choice
whose mean-pooled embedding is nearest (cosine) the context's, what a sentence-embedding model
such as all-MiniLM-L6-v2 answers without any training. Batches are fixed-length here (a
[batch, choices, seq] batch is not cut to its longest row). Writes metrics.json, model.keras and
TensorBoard logs to --output_dir; examples/export_savedmodel.py serves the model as its pair scorer
(an ensemble as each member's pair score, `member_scores`: the client averages the members'
softmaxes over a question's choices).
"""

import os

import _recorded_help  # noqa: F401 (answers --help before TensorFlow loads: examples/usage/)
import numpy as np

from bertlayers.metrics import accuracy
from bertlayers.models import MultipleChoice, SentenceEmbedder
from bertlayers.runs.finetuning import (
    add_ensemble_argument,
    add_finetuning_arguments,
    add_pooling_argument,
    encoder_source,
    files_written,
    finetune_restarts,
    fixed_length_config,
    packer_for,
    pooling_for,
    start,
    write_json,
)
from bertlayers.task_data.multiple_choice import encode_choices, read_choices
from bertlayers.training.length_batching import predict_by_length
from bertlayers.utils.cli import argument_parser, run_script
from bertlayers.utils.validation import POSITIVE_INT, flag


def untuned_accuracy(config, packer, examples, batch_size):
    """Accuracy of the starting encoder's mean-pooled cosine between context and choices."""
    from bertlayers.convert import load_encoder

    embedder = SentenceEmbedder(load_encoder(encoder_source(config)))
    texts = [e.context for e in examples] + [c for e in examples for c in e.choices]
    vectors = predict_by_length(embedder, packer(texts), batch_size=batch_size, verbose=0)["embedding"]  # [N + N·C, H]
    contexts, choices = (
        vectors[: len(examples)],
        vectors[len(examples) :].reshape(len(examples), len(examples[0].choices), -1),
    )
    predicted = np.einsum("nh,nch->nc", contexts, choices).argmax(-1)
    return accuracy(np.array([e.label for e in examples]), predicted)


def main():
    parser = argument_parser(__doc__)
    parser.add_argument("--train_file", required=True, help="JSON lines of training examples")
    parser.add_argument(
        "--eval_file", required=True, help="JSON lines of evaluation examples (evaluated after training)"
    )
    parser.add_argument(
        "--max_train_examples", type=flag(POSITIVE_INT), default=None, help="train on the file's first N examples"
    )
    parser.add_argument(
        "--max_eval_examples", type=flag(POSITIVE_INT), default=None, help="evaluate on the file's first N examples"
    )
    add_pooling_argument(parser)
    add_ensemble_argument(parser)
    args = add_finetuning_arguments(parser, sequence_length=96, epochs=1, batch_size=8, learning_rate=3e-5).parse_args()
    config = fixed_length_config(
        parser, args, "multiple-choice batches are fixed-length ([batch, choices, seq] is not cut)."
    )
    strategy = start(config)

    train, evaluation = read_choices(args.train_file), read_choices(args.eval_file)
    train, evaluation = train[: args.max_train_examples], evaluation[: args.max_eval_examples]
    choices = len(train[0].choices)
    if len(evaluation[0].choices) != choices:
        parser.error(
            f"{args.eval_file} has {len(evaluation[0].choices)} choices an example, {args.train_file} {choices}."
        )
    packer = packer_for(config, args.sequence_length)
    (x_train, y_train), (x_eval, y_eval) = encode_choices(packer, train), encode_choices(packer, evaluation)
    print(f"{len(train)} training and {len(evaluation)} evaluation examples, {choices} choices each")
    untuned = untuned_accuracy(config, packer, evaluation, 4 * args.batch_size)

    model, ensemble = finetune_restarts(
        strategy,
        config,
        lambda encoder: MultipleChoice(encoder, pooling=pooling_for(config, args.pooling)),
        (x_train, {"logits": y_train}, None),
        ensemble=args.ensemble,
    )
    logits = predict_by_length(model, x_eval, batch_size=args.batch_size, verbose=args.verbose)["logits"]
    metrics = {
        "accuracy": accuracy(y_eval, logits.argmax(-1)),
        "chance": 1 / choices,
        "untuned_cosine_accuracy": untuned,
        "eval_examples": len(evaluation),
        "init": "random" if args.random_init else encoder_source(config),
        **ensemble,
    }
    for member in getattr(model, "members", []):  # an ensemble: each member alone, for comparison
        alone = predict_by_length(member, x_eval, batch_size=args.batch_size, verbose=0)["logits"]
        metrics.setdefault("member_accuracies", []).append(accuracy(y_eval, alone.argmax(-1)))
    write_json(os.path.join(config.output_dir, "metrics.json"), metrics)
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()})

    print(files_written(config.output_dir))


if __name__ == "__main__":
    run_script(main)

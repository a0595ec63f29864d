"""Fine-tune a pretrained encoder for multiple choice: each of a context's choices scored, a softmax
over the choices (SWAG-style). Files are JSON lines of {"context", "choices", "label"}.

    python examples/prepare_datasets.py      # data/wiki_next_sentence: the Wikipedia excerpt's next-sentence choices
    python examples/run_multiple_choice.py --train_file data/wiki_next_sentence/train.jsonl \\
        --eval_file data/wiki_next_sentence/dev.jsonl --output_dir runs/choice
    python examples/run_multiple_choice.py ... --ensemble 3   # 3 seeds' mean choice probabilities

Two scorers (--scorer): "similarity" (the default) embeds the context and each choice alone and
scores their cosine, so training starts where the untuned encoder stands; "cross" packs each
(context, choice) pair through the encoder with a dense unit on top (BERT's recipe, which starts
from a fresh unit; give it --learning_rate 3e-5). Reports accuracy beside chance (1 / choices) and beside the starting encoder
untuned: the choice whose embedding (pooled as the scorer pools, the mean by default) is nearest
(cosine) the context's, what a sentence-embedding model such as all-MiniLM-L6-v2 answers without
any training. Batches are fixed-length here (a [batch, rows, seq] batch is not cut to its longest
row). Writes metrics.json, model.keras and TensorBoard logs to --output_dir;
examples/export_savedmodel.py serves the model's scoring part: the embedder (a text a row; the
client compares the context's embedding with each choice's) or the pair scorer (an ensemble as
each member's pair score, `member_scores`: the client averages the members' softmaxes over a
question's choices).
"""

import os

import _recorded_help  # noqa: F401 (answers --help before TensorFlow loads: examples/usage/)
import numpy as np

from bertlayers.metrics import accuracy
from bertlayers.models import MultipleChoice, SentenceEmbedder
from bertlayers.models.multiple_choice import SCORERS
from bertlayers.runs.finetuning_config import (
    add_finetuning_arguments,
    add_pooling_argument,
    encoder_source,
    fixed_length_config,
    pooling_for,
)
from bertlayers.runs.output_folder import files_written, start, write_json
from bertlayers.runs.restarts import add_ensemble_argument, finetune_restarts
from bertlayers.task_data.multiple_choice import encode_choices, read_choices
from bertlayers.training.length_batching import predict_by_length
from bertlayers.utils.cli import argument_parser, run_script
from bertlayers.utils.validation import POSITIVE_INT, flag


def untuned_accuracy(config, packer, examples, batch_size, pooling="mean"):
    """Accuracy of the starting encoder's cosine between the context's pooled embedding and each choice's."""
    from bertlayers.convert import load_encoder

    embedder = SentenceEmbedder(load_encoder(encoder_source(config)), pooling=pooling)
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
        "--eval_file",
        required=True,
        action="append",
        help="JSON lines of evaluation examples (evaluated after training); again for more sets (other text): "
        "each reported beside its untuned accuracy, the first at the top of metrics.json",
    )
    parser.add_argument(
        "--max_train_examples", type=flag(POSITIVE_INT), default=None, help="train on the file's first N examples"
    )
    parser.add_argument(
        "--max_eval_examples", type=flag(POSITIVE_INT), default=None, help="evaluate on the file's first N examples"
    )
    parser.add_argument(
        "--scorer",
        choices=SCORERS,
        default="similarity",
        help="similarity: the cosine of the context's and each choice's embeddings (starts where the untuned "
        "encoder stands); cross: each (context, choice) pair through the encoder, a dense unit on top",
    )
    add_pooling_argument(parser)
    add_ensemble_argument(parser)
    # 1e-5: the similarity scorer starts from embeddings trained for this comparison; at 3e-5 it
    # gained on the training set's kind of text and lost on other text (docs/studies.md).
    args = add_finetuning_arguments(parser, sequence_length=96, epochs=1, batch_size=8, learning_rate=1e-5).parse_args()
    config = fixed_length_config(
        parser, args, "multiple-choice batches are fixed-length ([batch, choices, seq] is not cut)."
    )
    strategy = start(config)

    train = read_choices(args.train_file)[: args.max_train_examples]
    evaluations = {path: read_choices(path)[: args.max_eval_examples] for path in args.eval_file}
    choices = len(train[0].choices)
    for path, evaluation in evaluations.items():
        if len(evaluation[0].choices) != choices:
            parser.error(f"{path} has {len(evaluation[0].choices)} choices an example, {args.train_file} {choices}.")
    pooling = pooling_for(config, args.pooling)
    if args.scorer == "similarity" and pooling == "pooler":
        if args.pooling == "pooler":
            parser.error(
                "--scorer similarity compares embeddings pooled over the tokens: --pooling mean, first or max."
            )
        pooling = "mean"  # --pooling auto on a checkpoint trained for its pooler: the tokens' mean to compare
    packer = config.tokenizer.packer(args.sequence_length)
    x_train, y_train = encode_choices(packer, train, args.scorer)
    evaluation = evaluations[args.eval_file[0]]
    print(f"{len(train)} training and {len(evaluation)} evaluation examples, {choices} choices each")
    untuned_pooling = pooling if args.scorer == "similarity" else "mean"
    untuned = {
        path: untuned_accuracy(config, packer, examples, 4 * args.batch_size, untuned_pooling)
        for path, examples in evaluations.items()
    }

    model, ensemble = finetune_restarts(
        strategy,
        config,
        lambda encoder: MultipleChoice(encoder, pooling=pooling, scorer=args.scorer),
        (x_train, {"logits": y_train}, None),
        ensemble=args.ensemble,
    )
    scored = {}
    for path, examples in evaluations.items():
        x_eval, y_eval = encode_choices(packer, examples, args.scorer)
        logits = predict_by_length(model, x_eval, batch_size=args.batch_size, verbose=args.verbose)["logits"]
        scored[path] = {
            "accuracy": accuracy(y_eval, logits.argmax(-1)),
            "untuned_cosine_accuracy": untuned[path],
            "eval_examples": len(examples),
        }
        for member in getattr(model, "members", []):  # an ensemble: each member alone, for comparison
            alone = predict_by_length(member, x_eval, batch_size=args.batch_size, verbose=0)["logits"]
            scored[path].setdefault("member_accuracies", []).append(accuracy(y_eval, alone.argmax(-1)))
    first, *others = args.eval_file
    metrics = {
        **scored[first],
        "chance": 1 / choices,
        "scorer": args.scorer,
        "init": "random" if args.random_init else encoder_source(config),
        **ensemble,
    }
    if others:
        metrics["other_eval_files"] = {path: scored[path] for path in others}
    write_json(os.path.join(config.output_dir, "metrics.json"), metrics)
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()})

    print(files_written(config.output_dir))


if __name__ == "__main__":
    run_script(main)

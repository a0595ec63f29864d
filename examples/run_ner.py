"""Fine-tune a pretrained encoder for named-entity recognition (CoNLL BIO files).

Labels sit on the first WordPiece of each word; scores are entity-level precision, recall and
F1 as conlleval / seqeval count them. Writes predictions.conll, metrics.json, model.keras and
TensorBoard logs to --output_dir.

    python examples/prepare_datasets.py        # the real WNUT-2016 data, fixed-seed splits
    python examples/run_ner.py --train_file data/wnut16/train.conll --eval_file data/wnut16/test.conll \\
        --output_dir runs/ner
    python examples/run_ner.py ... --feature_based     # frozen encoder, scalar mix + BiLSTM (ELMo style)
    python examples/run_ner.py ... --crf               # a linear-chain CRF over the tags, Viterbi decoding
    python examples/run_ner.py ... --ensemble 3        # 3 seeds' mean per-token probabilities, saved and served as one

With --crf every real piece is on the CRF's chain and labelled (a word's later pieces continue its
entity, the special tokens are "O"); words are still scored by their first piece's tag.
"""

import os

import _recorded_help  # noqa: F401 (answers --help before TensorFlow loads: examples/usage/)

from bertlayers.metrics import entity_scores
from bertlayers.models import TokenClassifier
from bertlayers.runs.finetuning_config import (
    add_feature_based_arguments,
    add_finetuning_arguments,
    encoder_source,
    feature_based_options,
    finetuning_config,
)
from bertlayers.runs.output_folder import files_written, start, write_json
from bertlayers.runs.restarts import (
    add_ensemble_argument,
    add_restart_arguments,
    check_restart_arguments,
    finetune_restarts,
)
from bertlayers.task_data.ner import decode_tags, encode_sentences, read_conll, tag_vocabulary, word_tags, write_conll
from bertlayers.training.length_batching import predict_by_length
from bertlayers.utils.cli import argument_parser, run_script
from bertlayers.utils.validation import POSITIVE_INT, flag


def main():
    parser = argument_parser(__doc__)
    parser.add_argument(
        "--train_file", required=True, help="CoNLL file of training sentences (a token and its tag per line)"
    )
    parser.add_argument("--eval_file", required=True, help="CoNLL file of evaluation sentences")
    parser.add_argument(
        "--vocabulary",
        default=None,
        help="vocab.txt (default: the one recorded with the encoder, else bert-base-uncased)",
    )
    parser.add_argument(
        "--max_train_examples", type=flag(POSITIVE_INT), default=None, help="train on the file's first N sentences"
    )
    parser.add_argument(
        "--crf",
        action="store_true",
        help="a linear-chain CRF on the logits: trained on the "
        "tag path's log-likelihood, decoded (and served) by Viterbi",
    )
    add_feature_based_arguments(parser)
    add_restart_arguments(parser)
    add_ensemble_argument(parser)
    args = add_finetuning_arguments(
        parser, sequence_length=48, epochs=4, batch_size=16, learning_rate=5e-4
    ).parse_args()
    check_restart_arguments(parser, args)
    if args.ensemble > 1 and args.crf:
        parser.error("--ensemble averages per-token probabilities; a CRF answers with its best tag path (drop --crf)")
    config = finetuning_config(parser, args)
    strategy = start(config)

    train, evaluation = read_conll(args.train_file), read_conll(args.eval_file)
    if args.max_train_examples:
        print(f"Training on the first {args.max_train_examples} of {len(train)} sentences of {args.train_file}")
        train = train[: args.max_train_examples]
    tags = tag_vocabulary(train)
    tokenizer = config.tokenizer.in_graph()
    x_train, y_train, w_train, _ = encode_sentences(
        train, tokenizer, args.sequence_length, tags, args.train_file, every_piece=args.crf
    )
    x_eval, y_eval, w_eval, starts = encode_sentences(
        evaluation, tokenizer, args.sequence_length, tags, args.eval_file, every_piece=args.crf
    )
    print(f"{len(train)} training and {len(evaluation)} evaluation sentences, {len(tags)} tags")

    # The CRF's loss reads every real token's tag; the softmax head's, the first pieces' (weights).
    train_data = (x_train, {"tags": y_train}, None) if args.crf else (x_train, {"logits": y_train}, {"logits": w_train})
    eval_data = (x_eval, {"tags": y_eval}, None) if args.crf else (x_eval, {"logits": y_eval}, {"logits": w_eval})

    def predicted_tags(model, x, starts):
        outputs = predict_by_length(model, x, batch_size=args.batch_size, verbose=args.verbose)
        return word_tags(outputs["tags"], starts, tags) if args.crf else decode_tags(outputs["logits"], starts, tags)

    dev_score = None
    if args.dev_file:
        dev = read_conll(args.dev_file)
        x_dev, _, _, dev_starts = encode_sentences(
            dev, tokenizer, args.sequence_length, tags, args.dev_file, every_piece=args.crf
        )

        def dev_score(model):  # entity-level F1
            return entity_scores([[tag for _, tag in s] for s in dev], predicted_tags(model, x_dev, dev_starts))["f1"]

    model, restarts = finetune_restarts(
        strategy,
        config,
        lambda encoder: TokenClassifier(encoder, tag_names=tags, crf=args.crf, **feature_based_options(config)),
        train_data,
        dev_score,
        args.restarts,
        validation=eval_data,
        ensemble=args.ensemble,
    )
    predicted = predicted_tags(model, x_eval, starts)
    gold = [[tag for _, tag in sentence] for sentence in evaluation]
    metrics = entity_scores(gold, predicted)
    metrics.update(
        {
            "eval_sentences": len(evaluation),
            "init": "random" if args.random_init else encoder_source(config),
            "decoder": "crf" if args.crf else "softmax",
            **restarts,
        }
    )
    write_json(os.path.join(config.output_dir, "metrics.json"), metrics)
    write_json(os.path.join(config.output_dir, "tags.json"), tags)  # what the served `tags` indices mean
    write_conll(
        os.path.join(config.output_dir, "predictions.conll"),
        [[(word, tag) for (word, _), tag in zip(sentence, tags_)] for sentence, tags_ in zip(evaluation, predicted)],
    )
    print({k: round(v, 2) for k, v in metrics.items() if isinstance(v, float)})

    print(files_written(config.output_dir))


if __name__ == "__main__":
    run_script(main)

"""Fine-tuning a pretrained encoder with a task head: what the task scripts share."""

import argparse
import json
import math
import os

import keras
import tensorflow as tf

from bertlayers.data.tokenizer import check_vocabulary_fits
from bertlayers.convert.loading import load_encoder
from bertlayers.networks import reinitialized
from bertlayers.training.callbacks import JsonHistory
from bertlayers.utils import atomic_files
from bertlayers.training.distribute import STRATEGIES, build_strategy, compile_options
from bertlayers.training.length_batching import length_batches, per_token_outputs
from bertlayers.training.optimization import create_optimizer


def add_finetuning_arguments(parser, sequence_length=128, epochs=3, batch_size=32, learning_rate=5e-5):
    """The flags every task script takes."""
    group = parser.add_argument_group("fine-tuning")
    group.add_argument("--init", default=None, help="encoder to start from: a Hugging Face folder, a .keras "
                       "file, or a pretrain.py output folder (default: the real all-MiniLM-L6-v2)")
    group.add_argument("--random_init", action="store_true", help="same architecture, random weights (no pretraining)")
    group.add_argument("--output_dir", required=True)
    group.add_argument("--sequence_length", type=int, default=sequence_length)
    group.add_argument("--epochs", type=int, default=epochs)
    group.add_argument("--batch_size", type=int, default=batch_size)
    group.add_argument("--learning_rate", type=float, default=None,
                       help=f"peak rate (default {learning_rate}; {FEATURE_BASED_LEARNING_RATE} with --feature_based)")
    group.add_argument("--warmup_proportion", type=float, default=0.1)
    group.add_argument("--weight_decay", type=float, default=0.01)
    group.add_argument("--layerwise_decay", type=float, default=None, help="e.g. 0.9: lower layers learn slower")
    group.add_argument("--precision", default="float32", choices=["float32", "mixed_bfloat16", "mixed_float16"])
    group.add_argument("--strategy", default="default", choices=list(STRATEGIES))
    group.add_argument("--tpu", default=None)
    group.add_argument("--num_cpu_devices", type=int, default=None)
    batches = group.add_mutually_exclusive_group()
    batches.add_argument("--group_by_length", action=argparse.BooleanOptionalAction, default=False,
                         help="training batches of similar lengths: less padding still, but 0.67 and 0.23 points lower "
                         "accuracy on Rotten Tomatoes in two 8-seed studies (README, 'Length-aware batches')")
    batches.add_argument("--pad_to_sequence_length", action="store_true",
                         help="pad every training batch to --sequence_length instead of cutting it to its longest "
                         "example: the same arithmetic, more work (how the fixed-length rows of the README were trained)")
    group.add_argument("--seed", type=int, default=0)
    group.add_argument("--verbose", type=int, default=1)
    parser.set_defaults(default_learning_rate=learning_rate)
    return parser


# A frozen encoder leaves only a freshly initialized BiLSTM and head to train: ELMo's task
# networks train at Adam's usual rate, far above what fine-tuning a pretrained network takes.
FEATURE_BASED_LEARNING_RATE = 1e-3


def add_feature_based_arguments(parser):
    """`--feature_based` and `--lstm_units`, for the runners whose models take them
    (`SequenceClassifier`, `TokenClassifier`)."""
    group = parser.add_argument_group("feature-based use (ELMo style)")
    group.add_argument("--feature_based", action="store_true", help="freeze the encoder; train a scalar mix of "
                       "all its layers, a BiLSTM and the head")
    group.add_argument("--lstm_units", type=int, default=256, help="width of each BiLSTM direction")
    return parser


def feature_based_options(args):
    """The model keywords the feature-based flags give."""
    return {"feature_based": args.feature_based, "lstm_units": args.lstm_units}


def start(args):
    """Build the strategy (before TensorFlow runs any op) and seed everything."""
    if args.learning_rate is None:
        args.learning_rate = FEATURE_BASED_LEARNING_RATE if getattr(args, "feature_based", False) else args.default_learning_rate
    strategy = build_strategy(args.strategy, tpu=args.tpu, num_cpu_devices=args.num_cpu_devices)
    keras.utils.set_random_seed(args.seed)
    # One run at a time in a folder: a second would overwrite the first's files as it writes them.
    atomic_files.claim(args.output_dir, "fine-tuning run in")
    atomic_files.remove_orphaned_staging(args.output_dir)
    return strategy


def encoder_source(args):
    from bertlayers.data.assets import minilm_path

    return args.init or minilm_path()


def vocabulary_for(args):
    """The vocab.txt for a run: --vocabulary, else the one beside the encoder, else bert-base-uncased's."""
    from bertlayers.data.assets import bert_uncased_vocabulary

    if getattr(args, "vocabulary", None):
        return args.vocabulary
    source = encoder_source(args)
    folder = source if os.path.isdir(source) else os.path.dirname(source)
    candidate = os.path.join(folder, "vocab.txt")
    return candidate if os.path.isfile(candidate) else bert_uncased_vocabulary()


def finetune(strategy, args, build_model, train, validation=None, num_examples=None):
    """Warm-start an encoder, put the task head on it, and `fit`.

    Args:
      strategy: from `start`.
      args: parsed `add_finetuning_arguments` flags.
      build_model: encoder → task model (an `EncoderModel`).
      train: (x, y, sample_weight) numpy structures; y and sample_weight keyed by output name.
      validation: optional (x, y, sample_weight) for per-epoch validation.

    Batches are cut to their longest example, unless a TPU strategy runs them (XLA wants fixed
    shapes): validation batches sorted by length (the same metrics, less padding), training
    batches random, as Hugging Face's padding collator makes them (the same arithmetic at the
    real tokens as fixed-length batches; `args.pad_to_sequence_length` keeps those), or grouped
    by length with `args.group_by_length` (less padding still, but 0.67 and 0.23 points lower on
    Rotten Tomatoes in two 8-seed studies; README, "Length-aware batches").

    Returns:
      The trained model, also saved atomically to `<output_dir>/model.keras`.
    """
    num_examples = num_examples or len(next(iter(train[0].values())))
    steps = args.epochs * math.ceil(num_examples / args.batch_size)
    with strategy.scope():
        encoder = load_encoder(encoder_source(args), dtype=args.precision)
        check_vocabulary_fits(vocabulary_for(args), encoder.config.vocabulary_size)
        if args.random_init:
            encoder = reinitialized(encoder, seed=args.seed)
        model = build_model(encoder)
        optimizer = create_optimizer(
            args.learning_rate,
            steps,
            int(args.warmup_proportion * steps),
            weight_decay=args.weight_decay,
            layerwise_decay=args.layerwise_decay,
            model=model,
        )
        model.compile(optimizer=optimizer, **compile_options(strategy))
    callbacks = [
        JsonHistory(os.path.join(args.output_dir, "history.json")),
        keras.callbacks.TensorBoard(os.path.join(args.output_dir, "logs")),
    ]
    by_length = not isinstance(strategy, tf.distribute.TPUStrategy)
    token_outputs = per_token_outputs(model)
    if validation is not None and by_length:
        validation = length_batches(*validation, batch_size=args.batch_size, token_outputs=token_outputs)
    if by_length and not getattr(args, "pad_to_sequence_length", False):
        data = length_batches(*train, batch_size=args.batch_size, token_outputs=token_outputs, shuffle=True,
                              group_by_length=getattr(args, "group_by_length", False), seed=args.seed)
        model.fit(data, epochs=args.epochs, validation_data=validation, callbacks=callbacks, verbose=args.verbose,
                  shuffle=False)  # the dataset reshuffles itself every epoch
    else:
        x, y, sample_weight = train
        model.fit(
            x, y, sample_weight=sample_weight, batch_size=args.batch_size, epochs=args.epochs,
            validation_data=validation, callbacks=callbacks, verbose=args.verbose, shuffle=True,
        )
    atomic_files.save_model(model, os.path.join(args.output_dir, "model.keras"))
    return model


def write_json(path, value):
    atomic_files.write_json(path, value, indent=1)



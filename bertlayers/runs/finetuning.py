"""Fine-tuning a pretrained encoder with a task head: what the task scripts share."""

import argparse
import atexit
import dataclasses
import logging
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Optional

import keras

from bertlayers import backend
from bertlayers.convert.loading import load_encoder, trained_pooling
from bertlayers.convert.model_files import record_tokenizer, recorded_tokenizer, save_model, tokenizer_of
from bertlayers.models.logits_model import LogitsModel
from bertlayers.networks import reinitialized
from bertlayers.networks.input_limits import input_limits
from bertlayers.runs.output_folder import take_output_folder
from bertlayers.runs.pretraining import PRECISIONS
from bertlayers.startup import require_tensorflow
from bertlayers.tokenizers.model_tokenizer import ModelTokenizer
from bertlayers.training.callbacks import JsonHistory, StopOnDivergence
from bertlayers.training.distribute import STRATEGIES, build_strategy, compile_options, worker_info
from bertlayers.training.length_batching import length_batches, per_token_outputs
from bertlayers.training.optimization import create_optimizer
from bertlayers.training.sharding import devices_per_batch, process_share
from bertlayers.utils import atomic_files
from bertlayers.utils.options import add_flags, check_options, option
from bertlayers.utils.validation import (
    NON_NEGATIVE_FLOAT,
    NON_NEGATIVE_INT,
    POSITIVE_FLOAT,
    POSITIVE_INT,
    PROBABILITY,
    Range,
    flag,
)

__all__ = [
    "FEATURE_BASED_LEARNING_RATE",
    "BestEpoch",
    "FinetuningConfig",
    "add_ensemble_argument",
    "add_feature_based_arguments",
    "add_finetuning_arguments",
    "add_pooling_argument",
    "add_restart_arguments",
    "check_restart_arguments",
    "encoder_source",
    "feature_based_options",
    "finetune",
    "finetune_restarts",
    "files_written",
    "finetuning_config",
    "fixed_length_config",
    "packer_for",
    "pooling_for",
    "start",
    "tokenizer_for",
    "tokenizer_of_source",
    "write_json",
]

logger = logging.getLogger(__name__)

tf = require_tensorflow(__name__)


# A frozen encoder leaves only a freshly initialized BiLSTM and head to train: ELMo's task
# networks train at Adam's usual rate, far above what fine-tuning a pretrained network takes.
FEATURE_BASED_LEARNING_RATE = 1e-3
DEFAULT_LEARNING_RATE = 5e-5
# Fewer optimizer steps than this rarely fine-tune anything: the run says so.
FEW_STEPS = 100
# Flags made in their own groups: the two ways of batching by length exclude each other; the
# feature-based settings only for the runners whose models take them.
LENGTH_BATCHING = ("group_by_length", "pad_to_sequence_length")
FEATURE_BASED = ("feature_based", "lstm_units")


def _all_but(names):
    return [field.name for field in dataclasses.fields(FinetuningConfig) if field.name not in names]


def add_finetuning_arguments(
    parser: argparse.ArgumentParser,
    sequence_length: int = 128,
    epochs: int = 3,
    batch_size: int = 32,
    learning_rate: float = 5e-5,
) -> argparse.ArgumentParser:
    """The flags every task script takes, made from `FinetuningConfig`'s fields (their help and
    ranges), with the script's own defaults. `--learning_rate` left unset takes `learning_rate`,
    or the feature-based rate with `--feature_based` (`FinetuningConfig.from_args`)."""
    group = parser.add_argument_group("fine-tuning")
    defaults = {"sequence_length": sequence_length, "epochs": epochs, "batch_size": batch_size}
    flags = add_flags(group, FinetuningConfig, defaults, skip=(*LENGTH_BATCHING, *FEATURE_BASED))
    flags[
        "learning_rate"
    ].help = f"peak rate (default {learning_rate}; {FEATURE_BASED_LEARNING_RATE} with --feature_based)"
    batches = group.add_mutually_exclusive_group()
    add_flags(batches, FinetuningConfig, skip=_all_but(LENGTH_BATCHING))
    parser.set_defaults(default_learning_rate=learning_rate)
    return parser


def add_feature_based_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`--feature_based` and `--lstm_units`, for the runners whose models take them
    (`SequenceClassifier`, `TokenClassifier`)."""
    group = parser.add_argument_group("feature-based use (ELMo style)")
    add_flags(group, FinetuningConfig, skip=_all_but(FEATURE_BASED))
    return parser


def add_pooling_argument(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`--pooling`, for the runners whose heads read one vector a sequence (`SequenceClassifier`
    and the models built on it); "auto" is resolved by `pooling_for`."""
    parser.add_argument(
        "--pooling",
        choices=("auto", *LogitsModel.POOLINGS),
        default="auto",
        help="what the head reads: the "
        "encoder's pooler (BERT's tanh dense on [CLS]), or the mean / first / max of its sequence output; "
        "auto: what the checkpoint was trained with (a sentence-transformers folder's pooling, such as the "
        "default all-MiniLM-L6-v2's mean, whose pooler was never trained), else the pooler",
    )
    return parser


def pooling_for(config: "FinetuningConfig", pooling: str) -> str:
    """`pooling`, or for "auto" what the run's checkpoint was trained with (`trained_pooling`)."""
    if pooling != "auto":
        return pooling
    chosen = "pooler" if config.random_init else trained_pooling(encoder_source(config))
    logger.info(f"Pooling: {chosen} (--pooling auto)")
    return chosen


@dataclasses.dataclass
class FinetuningConfig:
    """A fine-tuning run: where it starts and writes, and how it trains. Every field is typed and
    range-checked when the config is made (a ValueError names the field); the task scripts map
    their flags onto it (`from_args`).
    """

    output_dir: str = option(help="where the model, metrics, history and TensorBoard logs go")
    init: Optional[str] = option(
        None,
        "encoder to start from: a Hugging Face folder, a .keras file, or a pretrain.py output folder "
        "(default: the real all-MiniLM-L6-v2)",
    )
    random_init: bool = option(False, "same architecture, random weights (no pretraining)")
    vocabulary: Optional[str] = option(
        None, "vocab.txt (default: the encoder folder's, else bert-base-uncased's)", flag=False
    )
    overwrite: bool = option(
        False,
        "replace the run already in --output_dir (without it, a folder holding a finished or "
        "interrupted run is refused: runs do not resume)",
    )
    sequence_length: int = option(128, "pieces per example, [CLS] and [SEP]s included", Range(int, 2))
    epochs: int = option(3, "passes over the training examples", POSITIVE_INT)
    batch_size: int = option(32, "examples per step", POSITIVE_INT)
    learning_rate: Optional[float] = option(
        None, f"peak rate (default: the script's; {FEATURE_BASED_LEARNING_RATE} with --feature_based)", POSITIVE_FLOAT
    )
    warmup_proportion: float = option(0.1, "share of the steps with linear warmup", PROBABILITY)
    weight_decay: float = option(0.01, "decoupled weight decay (not on LayerNorm or biases)", NON_NEGATIVE_FLOAT)
    layerwise_decay: Optional[float] = option(
        None, "e.g. 0.9: lower layers learn slower", Range(float, 0, 1, low_open=True)
    )
    freeze_layers: Optional[int] = option(
        None,
        "freeze the embeddings and the encoder's first K layers (0: the embeddings only)",
        NON_NEGATIVE_INT,
        metavar="K",
    )
    precision: str = option("float32", "compute dtype policy (variables stay float32)", choices=PRECISIONS)
    strategy: str = option(
        "default",
        "tf.distribute strategy (under KERAS_BACKEND=jax: mirrored is Keras's data parallelism over this "
        "process's devices, multi_worker over those of the processes Keras's KERAS_DISTRIBUTION_* variables name)",
        choices=STRATEGIES,
    )
    tpu: Optional[str] = option(None, "TPU name or address, for --strategy tpu")
    num_cpu_devices: Optional[int] = option(
        None, "split the CPU into this many logical devices (to try mirrored training)", POSITIVE_INT
    )
    group_by_length: bool = option(
        False,
        "training batches of similar lengths: less padding still, but lower accuracy in the studies of "
        "docs/studies.md ('Length-aware batches: seed studies')",
    )
    pad_to_sequence_length: bool = option(
        False,
        "pad every training batch to --sequence_length instead of cutting it to its longest example: the "
        "same arithmetic, more work (how the fixed-length rows of docs/papers.md were trained)",
    )
    feature_based: bool = option(
        False, "freeze the encoder; train a scalar mix of all its layers, a BiLSTM and the head"
    )
    lstm_units: int = option(256, "width of each BiLSTM direction", POSITIVE_INT)
    keep_best: bool = option(
        True, "where the run validates, keep the weights of the epoch with the lowest validation loss"
    )
    early_stopping: Optional[int] = option(
        None, "where the run validates, stop after this many epochs without a lower validation loss", POSITIVE_INT
    )
    seed: int = option(0, "seed of the head's weights, dropout and the data order", Range(int))
    verbose: int = option(1, "0 silent, 1 progress bar, 2 one line per epoch", Range(int, 0, 2))

    def __post_init__(self):
        if not isinstance(self.output_dir, (str, os.PathLike)) or not str(self.output_dir):
            raise ValueError(f"output_dir must name a folder, got {self.output_dir!r}.")
        self.output_dir = str(self.output_dir)
        if self.learning_rate is None:
            self.learning_rate = FEATURE_BASED_LEARNING_RATE if self.feature_based else DEFAULT_LEARNING_RATE
        check_options(self)
        if self.group_by_length and self.pad_to_sequence_length:
            raise ValueError("group_by_length and pad_to_sequence_length exclude each other.")
        if self.feature_based and self.freeze_layers is not None:
            raise ValueError(
                "feature_based freezes the whole encoder already; freeze_layers cannot be combined with it."
            )

    @classmethod
    def from_args(cls, args):
        """The config of parsed `add_finetuning_arguments` flags (an unset `--learning_rate`
        takes the script's default, or the feature-based one)."""
        values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}
        if values.get("learning_rate") is None:
            values["learning_rate"] = (
                FEATURE_BASED_LEARNING_RATE if values.get("feature_based") else args.default_learning_rate
            )
        return cls(**values)


def finetuning_config(parser: argparse.ArgumentParser, args: argparse.Namespace) -> FinetuningConfig:
    """`FinetuningConfig.from_args(args)`; a bad value ends the script with one line (status 2)."""
    try:
        return FinetuningConfig.from_args(args)
    except ValueError as error:
        parser.error(str(error))


def fixed_length_config(parser: argparse.ArgumentParser, args: argparse.Namespace, why: str) -> FinetuningConfig:
    """`finetuning_config` for a runner whose training batches keep --sequence_length (inputs
    that length batching does not cut, `why`): --group_by_length is refused."""
    if args.group_by_length:
        parser.error(f"--group_by_length: {why}")
    args.pad_to_sequence_length = True
    return finetuning_config(parser, args)


def feature_based_options(config: "FinetuningConfig") -> dict:
    """The model keywords of the feature-based settings."""
    return {"feature_based": config.feature_based, "lstm_units": config.lstm_units}


def start(config: "FinetuningConfig") -> "tf.distribute.Strategy":
    """Build the strategy (before TensorFlow runs any op), seed everything, and take the output
    folder (a second live run into it is refused, `FolderBusyError`; one holding an earlier run's
    files too, `FileExistsError`, unless `config.overwrite`).

    In a run of several workers (`--strategy multi_worker`) the chief (worker 0) writes the run's
    files; every other worker computes the same and writes its copies to a temporary folder,
    removed when it ends: `config.output_dir` is changed to that folder there, so a runner writes
    everything to `config.output_dir`."""
    _check_config(config)
    # Each JAX process feeds its share of every batch (`_fit`, `predict_by_length`).
    strategy = build_strategy(
        config.strategy, tpu=config.tpu, num_cpu_devices=config.num_cpu_devices, shares_batches=True
    )
    keras.utils.set_random_seed(config.seed)
    _, worker, is_chief = worker_info()
    if not is_chief:
        config.output_dir = _worker_folder(worker)
    # One run at a time in a folder, and one run's files in it (see `take_output_folder`).
    take_output_folder(config.output_dir, "fine-tuning run in", overwrite=config.overwrite)
    return strategy


def _worker_folder(worker):
    """A folder of its own for a worker that is not the chief, removed when the process ends."""
    folder = tempfile.mkdtemp(prefix=f"bertlayers-worker{worker}-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    logger.info(f"Worker {worker}: the chief writes the run's files; this worker's copies go to {folder}")
    return folder


def _check_config(config):
    if not isinstance(config, FinetuningConfig):
        raise TypeError(
            f"Expected a FinetuningConfig, got a {type(config).__name__} (parsed flags: FinetuningConfig.from_args(args))."
        )


def encoder_source(config: "FinetuningConfig") -> str:
    """Where a run's encoder comes from: `config.init`, else the real all-MiniLM-L6-v2."""
    from bertlayers.utils.assets import minilm_path

    return config.init or minilm_path()


def tokenizer_for(config: "FinetuningConfig") -> ModelTokenizer:
    """The `ModelTokenizer` a run tokenizes with: its `vocabulary` (a vocab.txt, lower-cased), else
    the one recorded with (or beside) the encoder it starts from, else bert-base-uncased's."""
    if config.vocabulary:
        return ModelTokenizer.from_vocab_file(config.vocabulary)
    return tokenizer_of_source(encoder_source(config))


def tokenizer_of_source(source: str) -> ModelTokenizer:
    """The tokenizer recorded with (or beside) the encoder at `source`, else bert-base-uncased's."""
    from bertlayers.utils.assets import bert_uncased_vocabulary

    recorded = tokenizer_of(source)
    return recorded if recorded is not None else ModelTokenizer.from_vocab_file(bert_uncased_vocabulary())


def packer_for(config: "FinetuningConfig", sequence_length: int) -> Callable:
    """What turns a run's texts into its encoder's inputs (`ModelTokenizer.packer`): the starting
    checkpoint's own tokenizer and layout, or the run's WordPiece vocabulary in BERT's."""
    return tokenizer_for(config).packer(sequence_length)


def finetune(
    strategy: "tf.distribute.Strategy",
    config: "FinetuningConfig",
    build_model: Callable,
    train: tuple,
    validation: tuple | None = None,
    num_examples: int | None = None,
) -> keras.Model:
    """Warm-start an encoder, put the task head on it, and `fit`.

    Args:
      strategy: from `start`.
      config: the run's `FinetuningConfig`.
      build_model: encoder → task model (an `EncoderModel`).
      train: (x, y, sample_weight) numpy structures; y and sample_weight keyed by output name.
      validation: optional (x, y, sample_weight), validated after every epoch (its loss and
        metrics in the history and TensorBoard); with `config.keep_best` the model keeps the
        weights of the epoch with the lowest validation loss, with `config.early_stopping` N
        training stops after N epochs without a lower one.

    Batches are cut to their longest example, unless a TPU strategy runs them (XLA wants fixed
    shapes): validation batches sorted by length (the same metrics, less padding), training
    batches random, as Hugging Face's padding collator makes them (the same arithmetic at the
    real tokens as fixed-length batches; `config.pad_to_sequence_length` keeps those), or grouped
    by length with `config.group_by_length` (less padding still, but lower accuracy in the studies
    of docs/studies.md, "Length-aware batches: seed studies").

    Returns:
      The trained model, also saved atomically to `<output_dir>/model.keras` (no optimizer state;
      the vocabulary recorded in it).
    """
    _check_config(config)
    num_examples = num_examples or len(next(iter(train[0].values())))
    # Across processes a pass takes a multiple of the devices' count of examples (`_fit`).
    batches = math.ceil((num_examples - num_examples % devices_per_batch()) / config.batch_size)
    steps = config.epochs * batches
    if steps < FEW_STEPS:
        logger.warning(
            f"Only {steps} optimizer steps ({config.epochs} epochs of {batches} "
            f"batches of {config.batch_size}): fine-tuning usually takes a few hundred; raise --epochs or lower "
            "--batch_size."
        )
    model, vocabulary = _compiled_model(strategy, config, build_model, steps)
    _fit(model, strategy, config, train, validation)
    # For serving: weights, config and the vocabulary (the resumable state is the backup's job).
    save_model(
        record_tokenizer(model, vocabulary), os.path.join(config.output_dir, "model.keras"), settings=_settings(config)
    )
    return model


def _settings(config):
    """What a model.keras keeps of its run for those who load it (bertlayers.tasks): its sequence length."""
    return {"sequence_length": config.sequence_length}


def _compiled_model(strategy, config, build_model, steps):
    """The task model over the run's encoder, compiled under `strategy`, and the run's vocabulary
    (checked against the encoder before any training)."""
    with strategy.scope():
        encoder = load_encoder(encoder_source(config), dtype=config.precision)
        input_limits(encoder).check_sequence_length(config.sequence_length)
        vocabulary = tokenizer_for(config)
        vocabulary.in_graph(encoder.config.vocabulary_size)  # fits, before any training
        if config.random_init:
            encoder = reinitialized(encoder, seed=config.seed)
        model = build_model(encoder)
        if config.freeze_layers is not None:
            encoder.freeze_lower_layers(config.freeze_layers)
        optimizer = create_optimizer(
            config.learning_rate,
            steps,
            int(config.warmup_proportion * steps),
            weight_decay=config.weight_decay,
            layerwise_decay=config.layerwise_decay,
            model=model,
        )
        model.compile(optimizer=optimizer, **compile_options(strategy))
    return model, vocabulary


def _fit(model, strategy, config, train, validation):
    """`model.fit` on batches cut to their longest (see `finetune`), with the run's history and
    TensorBoard logs."""
    callbacks = [
        StopOnDivergence(),
        JsonHistory(os.path.join(config.output_dir, "history.json")),
        keras.callbacks.TensorBoard(os.path.join(config.output_dir, "logs")),
    ]
    if validation is not None and (config.keep_best or config.early_stopping):
        callbacks.insert(1, BestEpoch(config.keep_best, config.early_stopping or config.epochs))
    by_length = not isinstance(strategy, tf.distribute.TPUStrategy)
    token_outputs = per_token_outputs(model)
    # Arrays in one process where batches keep their full length (TPUs need fixed shapes); else
    # `length_batches` (across JAX processes always, each process feeding its share of each batch).
    if (not by_length or config.pad_to_sequence_length) and backend.process_index_and_count()[1] == 1:
        if validation is not None and by_length:
            validation = length_batches(*validation, batch_size=config.batch_size, token_outputs=token_outputs)
        x, y, sample_weight = train
        model.fit(
            x,
            y,
            sample_weight=sample_weight,
            batch_size=config.batch_size,
            epochs=config.epochs,
            validation_data=validation,
            callbacks=callbacks,
            verbose=config.verbose,
            shuffle=True,
        )
        return
    data, validation = _process_datasets(config, train, validation, token_outputs)
    # The dataset reshuffles itself every epoch.
    model.fit(
        data,
        epochs=config.epochs,
        validation_data=validation,
        callbacks=callbacks,
        verbose=config.verbose,
        shuffle=False,
    )


def _process_datasets(config, train, validation, token_outputs):
    """The training and validation `length_batches` of `_fit`, this process's share of each batch
    (`sharding.process_share`, which refuses a batch size the devices do not divide). Across JAX
    processes every device takes an equal share of every batch, the last one included, so each
    pass takes a multiple of all the devices' count of examples (`length_batches` warns of the
    rest it leaves out)."""

    def batches(data, **options):
        dataset = length_batches(
            *data,
            batch_size=config.batch_size,
            token_outputs=token_outputs,
            examples_multiple=devices_per_batch(),
            **options,
        )
        return process_share(dataset, config.batch_size)

    data = batches(
        train,
        shuffle=True,
        group_by_length=config.group_by_length,
        seed=config.seed,
        cut=not config.pad_to_sequence_length,
    )
    return data, None if validation is None else batches(validation)


class BestEpoch(keras.callbacks.EarlyStopping):
    """Keras's early stopping on the validation loss, which logs the epoch it keeps instead of
    printing it. `keep_best`: the model ends with that epoch's weights."""

    def __init__(self, keep_best: bool, patience: int):
        super().__init__(monitor="val_loss", patience=patience, restore_best_weights=keep_best, verbose=0)

    def on_train_end(self, logs=None):
        super().on_train_end(logs)
        if self.stopped_epoch > 0:
            logger.info(f"Stopped after epoch {self.stopped_epoch + 1}: no lower validation loss for {self.patience}")
        if self.restore_best_weights and self.best_weights is not None:
            logger.info(f"Keeping the weights of epoch {self.best_epoch + 1} (validation loss {self.best:.4f})")


def add_restart_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`--restarts N` and the `--dev_file` that picks among them, for the runners that take them."""
    group = parser.add_argument_group("random restarts (BERT's choice for small data: several seeds, the best on dev)")
    group.add_argument(
        "--restarts",
        type=int,
        default=1,
        help="fine-tune N times, seeds --seed, --seed + 1, ...; keep the model best on --dev_file",
    )
    group.add_argument(
        "--dev_file",
        default=None,
        help="what picks the best restart (never --eval_file, which would then no longer be held out)",
    )
    return parser


def add_ensemble_argument(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`--ensemble N`: fine-tune N models (seeds --seed, --seed + 1, ...) and answer with the mean of
    their probabilities (`ClassifierEnsemble`), saved and served as one model."""
    parser.add_argument(
        "--ensemble",
        type=flag(POSITIVE_INT),
        default=1,
        help="fine-tune N models with seeds --seed, --seed + 1, ... and answer (and serve) the mean of their "
        "probabilities",
    )
    return parser


def check_restart_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A run of several restarts names its dev file, and the dev file is not the evaluation file."""
    if args.restarts < 1:
        parser.error(f"--restarts must be at least 1, got {args.restarts}")
    if getattr(args, "ensemble", 1) > 1 and args.restarts > 1:
        parser.error("--ensemble keeps every model and --restarts the best one: give one of them")
    if args.restarts > 1 and not args.dev_file:
        parser.error("--restarts N > 1 keeps the best model on a dev set: give --dev_file")
    if args.dev_file and os.path.abspath(args.dev_file) == os.path.abspath(args.eval_file):
        parser.error("--dev_file is --eval_file: the best restart on it would not be scored on held-out data")


def finetune_restarts(
    strategy: "tf.distribute.Strategy",
    config: "FinetuningConfig",
    build_model: Callable,
    train: tuple,
    dev_score: Callable | None = None,
    restarts: int = 1,
    validation: tuple | None = None,
    ensemble: int = 1,
) -> tuple[keras.Model, dict]:
    """`finetune` `restarts` times with seeds `config.seed`, `config.seed + 1`, ... (head, dropout
    and data order differ), and keep the model whose `dev_score(model)` is highest (BERT's random
    restarts). Restart k writes to `<output_dir>/restart_<k>/`; the best is saved again as
    `<output_dir>/model.keras`. With `ensemble` N > 1 instead: N models so trained (member k in
    `<output_dir>/member_<k>/`), all kept, answering as one `ClassifierEnsemble` (`model.keras`).

    Returns:
      The best model and {"dev_scores": one a restart, "best_restart", "best_seed"}; or the
      ensemble and {"ensemble_seeds": one a member}.
    """
    if ensemble > 1:
        return _finetune_ensemble(strategy, config, build_model, train, validation, ensemble)
    if restarts == 1:
        return finetune(strategy, config, build_model, train, validation), {}
    best, scores = None, []
    for k in range(restarts):
        seed = config.seed + k
        keras.utils.set_random_seed(seed)
        run = dataclasses.replace(config, seed=seed, output_dir=os.path.join(config.output_dir, f"restart_{k}"))
        model = finetune(strategy, run, build_model, train, validation)
        scores.append(float(dev_score(model)))
        logger.info(f"restart {k} (seed {seed}): dev score {scores[-1]:.4f}")
        if best is None or scores[-1] > max(scores[:-1]):
            best = model
        del model  # only the best stays in memory
    chosen = int(max(range(restarts), key=scores.__getitem__))
    save_model(
        best, os.path.join(config.output_dir, "model.keras"), settings=_settings(config)
    )  # its vocabulary was recorded by finetune
    return best, {"dev_scores": scores, "best_restart": chosen, "best_seed": config.seed + chosen}


def _finetune_ensemble(strategy, config, build_model, train, validation, size):
    from bertlayers.models.ensemble import ClassifierEnsemble

    members = []
    for k in range(size):
        seed = config.seed + k
        keras.utils.set_random_seed(seed)
        run = dataclasses.replace(config, seed=seed, output_dir=os.path.join(config.output_dir, f"member_{k}"))
        members.append(finetune(strategy, run, build_model, train, validation))
        logger.info(f"ensemble member {k} (seed {seed}) trained")
    ensemble = ClassifierEnsemble(members)
    record_tokenizer(ensemble, recorded_tokenizer(members[0]))  # what finetune recorded on each member
    save_model(ensemble, os.path.join(config.output_dir, "model.keras"), settings=_settings(config))
    return ensemble, {"ensemble_seeds": [config.seed + k for k in range(size)]}


def files_written(output_dir: str) -> str:
    """A line naming what a run left in `output_dir` (its files and folders, TensorBoard's logs
    named as such): what a runner prints last. A worker other than the chief says the chief
    writes them."""
    _, worker, is_chief = worker_info()
    if not is_chief:
        return f"Worker {worker} done; the chief (worker 0) writes the run's files."
    names = sorted(os.listdir(output_dir)) if os.path.isdir(output_dir) else []
    shown = [
        f"{name}/ (TensorBoard: tensorboard --logdir {os.path.join(output_dir, name)})"
        if name == "logs"
        else name + ("/" if os.path.isdir(os.path.join(output_dir, name)) else "")
        for name in names
        if not name.startswith(".")
    ]
    return f"Files in {os.path.abspath(output_dir)}: {', '.join(shown)}"


def write_json(path: str, value: dict | list) -> None:
    """Write `value` as indented JSON to `path`, atomically."""
    atomic_files.write_json(path, value, indent=1)

"""A pretraining run: data → pretrainer → `model.fit` under a strategy → saved encoder.

The recipes (`--recipe`) are registered by the families in `bertlayers/families/`;
../shared/reference/ describes each objective.
"""

import dataclasses
import json
import logging
import os
import time
from typing import Optional

import keras
import numpy as np

from bertlayers.convert.hub import local_or_hub
from bertlayers.convert.model_files import record_tokenizer, save_model
from bertlayers.families.recipes import get_recipe, recipe_names
from bertlayers.networks import get_preset
from bertlayers.networks.encoder_base import EncoderBase
from bertlayers.pretraining_data.inputs import PretrainingDataConfig, pretraining_inputs
from bertlayers.tokenizers.model_tokenizer import ModelTokenizer
from bertlayers.training.callbacks import JsonHistory, LearningRateLogger, StopOnDivergence
from bertlayers.training.checkpointing import ResumableBackup
from bertlayers.training.distribute import STRATEGIES, build_strategy, compile_options, worker_info
from bertlayers.training.optimization import OPTIMIZERS, create_optimizer
from bertlayers.training.sharding import process_share
from bertlayers.utils import atomic_files
from bertlayers.utils.options import check_options, option
from bertlayers.utils.validation import (
    DROPOUT,
    NON_NEGATIVE_FLOAT,
    NON_NEGATIVE_INT,
    POSITIVE_FLOAT,
    POSITIVE_INT,
    not_found,
)

__all__ = [
    "OPTIMIZERS",
    "PRECISIONS",
    "PretrainingConfig",
    "build_pretrainer",
    "chance_loss",
    "InitialWeights",
    "check_run_settings",
    "check_start",
    "init_recipes",
    "initial_weights",
    "run_pretraining",
]

logger = logging.getLogger(__name__)

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")


@dataclasses.dataclass
class PretrainingConfig(PretrainingDataConfig):
    """A run: its data (the `PretrainingDataConfig` fields), recipe, model and training. Every
    field carries its help text and range (`bertlayers.utils.options`): checked when the config
    is made (a ValueError names the field), and `examples/pretrain.py`'s flags are made from them.

    The recipe is looked up and its options resolved once, here: `recipe_spec` and
    `recipe_options` are what the run uses.
    """

    output_dir: str = option(
        "runs/pretrain", "where the run writes its records, backups, logs and models (a killed run resumes here)"
    )
    recipe: str = option("bert", "the pretraining objective (listed below)", choices=recipe_names)
    preset: str = option("bert_tiny", "the encoder's sizes by name (bert_tiny, bert_base, albert_base, ...)")
    init: Optional[str] = option(
        None,
        "continue pretraining from this checkpoint: a Hugging Face folder, a .keras model or a pretraining "
        "run's folder (its encoder, its MLM head where it has one, its WordPiece vocabulary and casing; "
        "--preset, --vocabulary and --lowercase then come from it)",
    )
    batch_size: int = option(32, "examples per step, over all replicas", POSITIVE_INT)
    num_train_steps: int = option(600, "steps in all", POSITIVE_INT)
    checkpoint_every: int = option(
        100, "steps per epoch: a backup after each (num_train_steps must be a multiple)", POSITIVE_INT
    )
    learning_rate: float = option(1e-3, "peak learning rate, after warmup; linear decay to 0", POSITIVE_FLOAT)
    warmup_steps: Optional[int] = option(None, "steps of linear warmup (default: 10% of the steps)", NON_NEGATIVE_INT)
    optimizer: str = option("adamw", "adamw, or lamb (large batches)", choices=OPTIMIZERS)
    weight_decay: float = option(0.01, "decoupled weight decay (not on LayerNorm or biases)", NON_NEGATIVE_FLOAT)
    precision: str = option("float32", "compute dtype policy (variables stay float32)", choices=PRECISIONS)
    jit_compile: bool = option(False, "compile the train step with XLA (under KERAS_BACKEND=jax: always)")
    steps_per_execution: int = option(1, "steps per call into the compiled loop", POSITIVE_INT)
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
    dropout: Optional[float] = option(None, "dropout of the encoder (default: the preset's)", DROPOUT)
    eval_corpus: Optional[str] = option(
        None,
        "held-out text in --corpus_format: the loss on it is measured before training and after "
        "(in summary.json), e.g. to see a domain adaptation take",
    )
    options: Optional[dict] = option(
        None, "the recipe's own settings, NAME=VALUE (repeatable; listed below)", flag=False
    )

    def __post_init__(self):
        self.check_files(self.eval_corpus)
        check_options(self)
        if self.init is not None:
            self.init = local_or_hub(self.init)  # a Hub name: its folder in huggingface_hub's cache
            if not os.path.exists(self.init):
                raise not_found(self.init, "checkpoint (--init)")
        if self.init is not None and (self.vocabulary or self.vocabulary_size):
            raise ValueError("--init brings the checkpoint's vocabulary: give no --vocabulary or --vocabulary_size.")
        if self.init is not None and not get_recipe(self.recipe).continues_checkpoint:
            raise ValueError(
                f"Recipe {self.recipe!r} cannot start from a checkpoint (--init); recipes that can: "
                f"{', '.join(init_recipes())}."
            )
        self.recipe_spec = get_recipe(self.recipe)
        self.recipe_options = self.recipe_spec.resolved_options(self.options)
        self._check_masking(self.recipe_spec.objective_for(self.recipe_options))
        if self.num_train_steps % self.checkpoint_every:
            raise ValueError(
                f"num_train_steps ({self.num_train_steps}) must be a multiple of checkpoint_every "
                f"({self.checkpoint_every}): training runs in epochs of checkpoint_every steps."
            )
        stages = self.recipe_spec.stages_for(self.recipe_options)
        if len(stages) > 1 and self.num_train_steps % (len(stages) * self.checkpoint_every):
            raise ValueError(
                f"Recipe {self.recipe!r} with these options trains in {len(stages)} stages "
                f"({', '.join(stage.name for stage in stages)}) of equal steps: num_train_steps "
                f"({self.num_train_steps}) must be a multiple of {len(stages)} x checkpoint_every ({self.checkpoint_every})."
            )
        get_preset(self.preset)

    def _check_masking(self, objective):
        """A ValueError where `masking` would not be what the recipe's data does (never silently)."""
        if self.masking == "token":
            return
        if objective.masking != "static":
            how = "masks each batch as it is drawn, token by token" if objective.masking else "masks nothing"
            static = [
                n
                for n in recipe_names()
                if get_recipe(n).objective_for(get_recipe(n).resolved_options({})).masking == "static"
            ]
            raise ValueError(
                f"--masking {self.masking}: recipe {self.recipe!r} {how}; the masking strategies apply to "
                f"recipes whose records are masked when written: {', '.join(static)}."
            )
        if objective.masking_strategy not in (None, self.masking):
            raise ValueError(
                f"--masking {self.masking}: recipe {self.recipe!r} masks by {objective.masking_strategy}; give no --masking."
            )


# Settings that may change between a run and its resumption: they do not change what is trained.
RESUMABLE_CHANGES = (
    "output_dir",
    "verbose",
    "strategy",
    "tpu",
    "num_cpu_devices",
    "jit_compile",
    "steps_per_execution",
)


def check_run_settings(config: "PretrainingConfig", trained: bool) -> None:
    """Record the run's settings in `<output_dir>/run_config.json`, or check them against it.

    Resuming a run (`trained`: it has a backup) with other settings (another preset, step
    count, checkpoint interval, corpus options...) would restore weights into the wrong model
    or train nothing while claiming to resume; instead this raises a ValueError listing what
    differs. A run that never reached a backup takes the new settings.
    """
    path = os.path.join(config.output_dir, "run_config.json")
    settings = {k: v for k, v in dataclasses.asdict(config).items() if k not in RESUMABLE_CHANGES}
    if os.path.exists(path) and trained:
        with open(path, encoding="utf-8") as f:
            recorded = json.load(f)
        differs = [
            f"{key}: {recorded.get(key)!r} then, {value!r} now"
            for key, value in settings.items()
            if recorded.get(key) != json.loads(json.dumps(value))
        ]
        if differs:
            raise ValueError(
                f"{config.output_dir} holds a run made with other settings ({'; '.join(differs)}). "
                f"Rerun with the recorded settings ({path}) to resume it, or use a new --output_dir."
            )
        return
    atomic_files.write_json(path, settings, indent=1)


def build_pretrainer(
    config: "PretrainingConfig", vocabulary_size: int, start: Optional["InitialWeights"] = None
) -> keras.Model:
    """The recipe's pretrainer over the preset's architecture (random initialization), or over
    the architecture of `start` (a checkpoint's, `initial_weights`) with its weights."""
    first = config.recipe_spec.stages_for(config.recipe_options)[0]
    return _stage_model(config, first, vocabulary_size, start)


def _stage_model(config, stage, vocabulary_size, start=None, previous=None):
    """`stage`'s model: over `start`'s encoder and weights (`--init`), or built by the stage
    (the preset's architecture; `previous`, the stage before's trained model)."""
    if start is not None:
        return _pretrainer_from(config, start)
    return stage.build(_encoder_config(config, vocabulary_size), config.precision, config.recipe_options, previous)


def _encoder_config(config, vocabulary_size):
    """The preset's architecture with the run's vocabulary, dropout and the recipe's changes."""
    recipe = config.recipe_spec
    encoder_config = get_preset(config.preset).replace(vocabulary_size=vocabulary_size)
    if config.sequence_length > encoder_config.max_sequence_length:
        raise ValueError(
            f"sequence_length {config.sequence_length} exceeds the preset's {encoder_config.max_sequence_length} positions."
        )
    if config.dropout is not None:
        encoder_config = encoder_config.replace(dropout=config.dropout, attention_dropout=config.dropout)
    if recipe.encoder_config is not None:
        encoder_config = recipe.encoder_config(encoder_config)
    return encoder_config


@dataclasses.dataclass(frozen=True)
class InitialWeights:
    """What continued pretraining (`--init`) starts from: the checkpoint's encoder, its masked-LM
    head where it has one, and its WordPiece vocabulary."""

    source: str
    encoder: keras.Model
    lm_head: Optional[keras.layers.Layer]
    vocabulary: ModelTokenizer


def initial_weights(source: str) -> InitialWeights:
    """The encoder, MLM head and vocabulary of `source`: a Hugging Face checkpoint folder (any
    registered model_type), a `.keras` model (a pretrainer, an encoder, a task model) or an
    examples/pretrain.py output folder (its pretrainer.keras). A ValueError names a checkpoint
    whose tokenizer is not a WordPiece vocabulary (the pretraining data path reads vocab.txt)."""
    from bertlayers.convert.loading import load_checkpoint, load_model_file
    from bertlayers.convert.model_files import recorded_tokenizer

    if os.path.isdir(source) and os.path.isfile(os.path.join(source, "config.json")):
        model = load_checkpoint(source).model
    elif os.path.isdir(source) and os.path.isfile(os.path.join(source, "pretrainer.keras")):
        model = load_model_file(os.path.join(source, "pretrainer.keras"))
    elif os.path.isdir(source):
        raise FileNotFoundError(
            f"{source} holds neither a Hugging Face checkpoint (config.json) nor a pretraining run (pretrainer.keras)."
        )
    else:
        model = load_model_file(source)
    encoder = model if isinstance(model, EncoderBase) else getattr(model, "encoder", None)
    if not isinstance(encoder, EncoderBase):
        raise ValueError(f"{source} holds a {type(model).__name__}, which has no bertlayers encoder.")
    vocabulary = recorded_tokenizer(model) or recorded_tokenizer(encoder)
    if vocabulary is None or not vocabulary.is_wordpiece_vocabulary:
        kind = "none recorded" if vocabulary is None else vocabulary.describe()
        raise ValueError(
            f"{source}: continued pretraining reads a WordPiece vocabulary (vocab.txt), and this checkpoint's "
            f"tokenizer is {kind}; the pretraining data path does not read other tokenizers yet."
        )
    lm_head = getattr(model, "lm_head", None) if model is not encoder else None
    return InitialWeights(source, encoder, lm_head, vocabulary)


def check_start(config: "PretrainingConfig", start: InitialWeights) -> None:
    """A ValueError naming what keeps the run's recipe and settings from starting at `start`."""
    recipe = config.recipe_spec
    encoder_config = start.encoder.config
    if config.sequence_length > encoder_config.max_sequence_length:
        raise ValueError(
            f"sequence_length {config.sequence_length} exceeds the {encoder_config.max_sequence_length} positions of "
            f"{start.source}."
        )
    if recipe.encoder_config is not None and recipe.encoder_config(encoder_config) != encoder_config:
        raise ValueError(
            f"Recipe {recipe.name!r} trains another architecture than {start.source}'s "
            f"({encoder_config.architecture}{', bidirectional' if not encoder_config.causal else ''}): "
            f"it cannot start from it (--init). Recipes that can: {', '.join(init_recipes())}."
        )


def _pretrainer_from(config, start):
    """The recipe's pretrainer over `start`'s encoder architecture, holding its weights (and its
    MLM head's where it has one)."""
    check_start(config, start)
    encoder_config = start.encoder.config
    if config.dropout is not None:
        encoder_config = encoder_config.replace(dropout=config.dropout, attention_dropout=config.dropout)
    model = config.recipe_spec.build_pretrainer(encoder_config, config.precision, config.recipe_options)
    model.encoder.set_weights(start.encoder.get_weights())
    if start.lm_head is not None and type(start.lm_head) is type(model.lm_head):
        model.lm_head.set_weights(start.lm_head.get_weights())
        logger.info(f"Starting from {start.source}: its encoder and masked-LM head")
    else:
        logger.info(f"Starting from {start.source}: its encoder; the masked-LM head is new (the checkpoint has none)")
    return model


def init_recipes() -> list:
    """The recipes that can start from a checkpoint (`--init`)."""
    return [name for name in recipe_names() if get_recipe(name).continues_checkpoint]


def run_pretraining(config: "PretrainingConfig") -> dict:
    """Run (or resume) a pretraining run; returns a summary dict (also written to summary.json).

    A run killed at any point and started again with the same config resumes from its last
    backup (every `checkpoint_every` steps), consumes exactly the batches an uninterrupted
    run would, and ends with the same number of steps. A second run started into the same
    `output_dir` while one runs is refused (`FolderBusyError`).
    """
    _, worker_index, is_chief = worker_info()
    # Non-chief workers keep their own backups and logs: the files must not collide.
    suffix = "" if is_chief else f"-worker{worker_index}"
    with atomic_files.locked(config.output_dir, "pretraining run in", wait=False, lock_name=f".run{suffix}.lock"):
        return _run_pretraining(config, is_chief, suffix)


def _run_pretraining(config, is_chief, suffix):
    # Each JAX process feeds its share of every batch (`_train_stage`).
    strategy = build_strategy(
        config.strategy, tpu=config.tpu, num_cpu_devices=config.num_cpu_devices, shares_batches=True
    )
    keras.utils.set_random_seed(config.seed)
    atomic_files.remove_orphaned_staging(config.output_dir)
    stages = config.recipe_spec.stages_for(config.recipe_options)
    # One stage runs in the run's folder; each of several in a folder of its own.
    folders = [config.output_dir] if len(stages) == 1 else [os.path.join(config.output_dir, s.name) for s in stages]
    start, data_config = None, config
    if config.init is not None:  # loaded and checked before the run writes anything
        start = initial_weights(config.init)
        check_start(config, start)
    restored = [ResumableBackup.restored_epoch(os.path.join(folder, "backup" + suffix)) for folder in folders]
    check_run_settings(config, trained=any(restored))
    if start is not None:
        # The checkpoint's vocabulary is the run's: written beside the run, it keys the cached data.
        vocabulary_path = os.path.join(config.output_dir, "vocab.txt")
        atomic_files.write_text(vocabulary_path, "".join(token + "\n" for token in start.vocabulary.tokens))
        data_config = dataclasses.replace(
            config, init=None, vocabulary=vocabulary_path, lowercase=start.vocabulary.lowercase
        )
    steps = config.num_train_steps // len(stages)
    summaries, previous = [], None
    for index, (stage, folder) in enumerate(zip(stages, folders)):
        if index:
            # Seeded by stage: a stage builds the same model whether the one before ran in this process or not.
            keras.utils.set_random_seed(config.seed + index)
            previous = _load_stage_model(os.path.join(folders[index - 1], "pretrainer.keras"))
            logger.info(f"Stage {index + 1} of {len(stages)}: {stage.name}, {steps} steps")
        elif len(stages) > 1:
            logger.info(f"Stage 1 of {len(stages)}: {stage.name}, {steps} steps")
        # The last stage's models are the run's: saved in the run's folder too.
        model_folders = (
            (folder,) if folder == config.output_dir or index < len(stages) - 1 else (folder, config.output_dir)
        )
        run = _StageRun(config, stage, folder, steps, index * steps, suffix, model_folders)
        summaries.append(_train_stage(run, strategy, data_config, restored[index], start, previous, is_chief))
    if len(stages) == 1:
        return summaries[0]
    summary = _staged_summary(config, stages, summaries)
    if is_chief:
        atomic_files.write_json(os.path.join(config.output_dir, "summary.json"), summary, indent=1)
    return summary


@dataclasses.dataclass(frozen=True)
class _StageRun:
    """A stage of a run: its recipe stage, folder, steps, and where in the run's batches it starts."""

    config: object
    stage: object
    folder: str
    steps: int
    first_step: int
    suffix: str
    model_folders: tuple

    def path(self, name):
        """`name` (suffixed per worker) in the stage's folder: history.json -> history-worker1.json."""
        stem, extension = os.path.splitext(name)
        return os.path.join(self.folder, stem + self.suffix + extension)


def _train_stage(run, strategy, data_config, initial_epoch, start, previous, is_chief):
    """Train (or resume, or find finished) one stage; save its models and summary; return the summary."""
    config, stage = run.config, run.stage
    data = pretraining_inputs(
        data_config,
        config.output_dir,
        config.recipe_spec.objective_for(config.recipe_options),
        config.batch_size,
        config.num_train_steps,
        skip_batches=run.first_step + initial_epoch * config.checkpoint_every,
    )
    dataset, vocab = process_share(data.dataset, config.batch_size), data.vocab
    epochs = run.steps // config.checkpoint_every
    heldout = _heldout_batches(config, data_config, data.vocabulary)

    with strategy.scope():
        model = _stage_model(config, stage, vocab.size, start, previous)
        warmup = config.warmup_steps if config.warmup_steps is not None else run.steps // 10
        optimizer = create_optimizer(
            config.learning_rate,
            run.steps,
            warmup,
            optimizer=config.optimizer,
            weight_decay=config.weight_decay,
        )
        model.compile(optimizer=optimizer, **compile_options(strategy, config.jit_compile, config.steps_per_execution))

    # The backup last: an epoch's history and logs are written before the backup that skips it
    # on resume (killed between them, the resumed run redoes the epoch and rewrites its entry;
    # the other way round, the epoch would be missing from the history).
    callbacks = [
        LearningRateLogger(every=config.checkpoint_every),
        StopOnDivergence(),  # before the history and the backup record a loss that is not a number
        JsonHistory(run.path("history.json")),
        keras.callbacks.TensorBoard(os.path.join(run.folder, "logs" + run.suffix), update_freq=config.checkpoint_every),
        ResumableBackup(run.path("backup")),
    ]
    initial_path = run.path("initial_loss.json")
    _say_where_training_starts(run, model, dataset, initial_epoch, epochs, initial_path, heldout)
    started = time.time()
    model.fit(
        dataset,
        epochs=epochs,
        steps_per_epoch=config.checkpoint_every,
        initial_epoch=initial_epoch,
        callbacks=callbacks,
        verbose=config.verbose,
        shuffle=False,  # the dataset shuffles itself, per pass and resumably
    )
    summary = _summary(run, model, vocab, time.time() - started, initial_path)
    if heldout is not None:
        before = _read_json(initial_path)["heldout"]
        if not isinstance(before, dict):  # recorded before the reported metrics were measured too
            before = {stage.loss_key: before}
        for key, value in _heldout_losses(stage, model, heldout).items():
            if key in before:
                summary["heldout_before_" + key], summary["heldout_after_" + key] = before[key], value
    if is_chief:
        # Weights, config and the run's vocabulary, without optimizer state (the backup keeps that).
        encoder = _finished_encoder(model)
        tokenizer = vocab.model_tokenizer(data_config.lowercase)  # what fine-tuning tokenizes with
        if tokenizer is not None:
            model, encoder = record_tokenizer(model, tokenizer), record_tokenizer(encoder, tokenizer)
        for folder in run.model_folders:
            save_model(model, os.path.join(folder, "pretrainer.keras"))
            save_model(encoder, os.path.join(folder, "encoder.keras"))
        atomic_files.write_json(os.path.join(run.folder, "summary.json"), summary, indent=1)
    return summary


def _finished_encoder(model):
    """What a pretrainer leaves for fine-tuning: its `finished_encoder()` where it has one (DeBERTa-v3
    folds its tables, the biLM drops its softmax), else its encoder."""
    return model.finished_encoder() if hasattr(model, "finished_encoder") else model.encoder


def _load_stage_model(path):
    from bertlayers.convert.loading import load_model_file

    return load_model_file(path)


def _staged_summary(config, stages, summaries):
    """The run's summary over its stages: the last stage's figures (its model is the run's), the
    run's steps and time, the recipe's loss from before the first stage, and each stage's own."""
    summary = dict(summaries[-1])
    loss_key = config.recipe_spec.loss_key
    summary.update(
        steps=sum(s["steps"] for s in summaries),
        seconds_this_run=round(sum(s["seconds_this_run"] for s in summaries), 1),
        recipe=config.recipe,
        loss_key=loss_key,
        stages={stage.name: s for stage, s in zip(stages, summaries)},
    )
    for key in ("initial_", "first_epoch_", "heldout_before_"):  # from the stage that first reports it
        first = next((s[key + loss_key] for s in summaries if key + loss_key in s), None)
        if first is not None:
            summary[key + loss_key] = first
    return summary


def _heldout_batches(config, data_config, vocabulary):
    """(dataset, steps) of `config.eval_corpus`'s records, made as the training data's are (same
    vocabulary, layout and masking seed: the same batches before and after), or None."""
    if config.eval_corpus is None:
        return None
    heldout_config = dataclasses.replace(
        data_config, init=None, corpus=config.eval_corpus, vocabulary=vocabulary, vocabulary_size=None
    )
    data = pretraining_inputs(
        heldout_config,
        os.path.join(config.output_dir, "heldout"),
        config.recipe_spec.objective_for(config.recipe_options),
        config.batch_size,
        config.batch_size,
    )
    return process_share(data.dataset, config.batch_size), max(1, data.num_records // config.batch_size)


def _heldout_losses(stage, model, heldout):
    """{key: value on the held-out batches} for the stage's loss and each reported metric logged."""
    dataset, steps = heldout
    logs = model.evaluate(dataset, steps=steps, verbose=0, return_dict=True)
    keys = [stage.loss_key] + [key for key in stage.report if key in logs or key.split("_", 1)[1] in logs]
    return {key: _logged_metric(logs, key) for key in keys}


def _read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _say_where_training_starts(run, model, dataset, initial_epoch, epochs, initial_path, heldout=None):
    """Log a finished, resumed or new stage; a new one first records the untrained model's loss."""
    config, loss_key = run.config, run.stage.loss_key
    if initial_epoch >= epochs:
        logger.info(f"{run.folder} is complete ({run.steps} steps); nothing left to train.")
    elif initial_epoch:
        logger.info(
            f"Resuming after step {initial_epoch * config.checkpoint_every} (epoch {initial_epoch} of {epochs})"
        )
    else:
        # The untrained model's loss on the first batches: what training is measured against.
        initial = model.evaluate(dataset, steps=4, verbose=0, return_dict=True)
        record = {k: float(v) for k, v in initial.items()}
        logger.info(f"Initial {loss_key}: {_logged_metric(initial, loss_key):.3f}")
        if heldout is not None:
            record["heldout"] = _heldout_losses(run.stage, model, heldout)
            logger.info(f"Initial {loss_key} on {config.eval_corpus}: {record['heldout'][loss_key]:.3f}")
        atomic_files.write_json(initial_path, record)
        logger.info(f"Training {run.steps} steps of {config.batch_size} sequences")


def _summary(run, model, vocab, seconds, initial_path):
    """The stage's summary: steps, time, and the loss (and the stage's reported metrics) before
    training, over the first epoch and over the last."""
    loss_key = run.stage.loss_key
    summary = {
        "steps": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
        "seconds_this_run": round(seconds, 1),
        "recipe": run.config.recipe,
        "loss_key": loss_key,
        "vocabulary_size": vocab.size,
        # The encoder fine-tuning starts from, and everything pretraining trains (heads, a generator).
        "encoder_parameters": int(_finished_encoder(model).count_params()),
        "pretrainer_parameters": int(model.count_params()),
    }
    with open(run.path("history.json"), encoding="utf-8") as f:
        history = json.load(f)
    with open(initial_path, encoding="utf-8") as f:
        summary["initial_" + loss_key] = _logged_metric(json.load(f), loss_key)
    for key in (loss_key, *run.stage.report):
        summary["first_epoch_" + key] = _logged_metric(history[0], key)
        summary["last_epoch_" + key] = _logged_metric(history[-1], key)
    return summary


def _logged_metric(logs, key):
    """A head's loss or metric from Keras logs: named `<head>_<metric>`, or plain `<metric>`
    when the model has one head."""
    return float(logs[key] if key in logs else logs[key.split("_", 1)[1]])


def chance_loss(vocabulary_size: int) -> float:
    """The masked-LM loss of a uniform guess, ln V: where an untrained model starts."""
    return float(np.log(vocabulary_size))

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

from bertlayers.convert.model_files import record_vocabulary, save_model
from bertlayers.families.recipes import get_recipe, recipe_names
from bertlayers.networks import get_preset
from bertlayers.pretraining_data.inputs import PretrainingDataConfig, pretraining_inputs
from bertlayers.tokenizers.tokenizer import ModelVocabulary
from bertlayers.training.callbacks import JsonHistory, LearningRateLogger
from bertlayers.training.checkpointing import ResumableBackup
from bertlayers.training.distribute import STRATEGIES, build_strategy, compile_options, worker_info
from bertlayers.training.optimization import OPTIMIZERS, create_optimizer
from bertlayers.utils import atomic_files
from bertlayers.utils.options import check_options, option
from bertlayers.utils.validation import DROPOUT, NON_NEGATIVE_FLOAT, NON_NEGATIVE_INT, POSITIVE_FLOAT, POSITIVE_INT

__all__ = [
    "OPTIMIZERS",
    "PRECISIONS",
    "PretrainingConfig",
    "build_pretrainer",
    "chance_loss",
    "check_run_settings",
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
    jit_compile: bool = option(False, "compile the train step with XLA")
    steps_per_execution: int = option(1, "steps per call into the compiled loop", POSITIVE_INT)
    strategy: str = option("default", "tf.distribute strategy", choices=STRATEGIES)
    tpu: Optional[str] = option(None, "TPU name or address, for --strategy tpu")
    num_cpu_devices: Optional[int] = option(
        None, "split the CPU into this many logical devices (to try mirrored training)", POSITIVE_INT
    )
    dropout: Optional[float] = option(None, "dropout of the encoder (default: the preset's)", DROPOUT)
    options: Optional[dict] = option(
        None, "the recipe's own settings, NAME=VALUE (repeatable; listed below)", flag=False
    )

    def __post_init__(self):
        self.check_files()
        check_options(self)
        self.recipe_spec = get_recipe(self.recipe)
        self.recipe_options = self.recipe_spec.resolved_options(self.options)
        if self.num_train_steps % self.checkpoint_every:
            raise ValueError(
                f"num_train_steps ({self.num_train_steps}) must be a multiple of checkpoint_every "
                f"({self.checkpoint_every}): training runs in epochs of checkpoint_every steps."
            )
        get_preset(self.preset)


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


def check_run_settings(config: object, trained: bool) -> None:
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


def build_pretrainer(config: object, vocabulary_size: int) -> keras.Model:
    """The recipe's pretrainer over the preset's architecture (random initialization)."""
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
    return recipe.build_pretrainer(encoder_config, config.precision, config.recipe_options)


def run_pretraining(config: object) -> dict:
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
    strategy = build_strategy(config.strategy, tpu=config.tpu, num_cpu_devices=config.num_cpu_devices)
    keras.utils.set_random_seed(config.seed)
    atomic_files.remove_orphaned_staging(config.output_dir)
    backup_dir = os.path.join(config.output_dir, "backup" + suffix)
    initial_epoch = ResumableBackup.restored_epoch(backup_dir)
    check_run_settings(config, trained=initial_epoch > 0)

    data = pretraining_inputs(
        config,
        config.output_dir,
        config.recipe_spec.objective_for(config.recipe_options),
        config.batch_size,
        config.num_train_steps,
        skip_batches=initial_epoch * config.checkpoint_every,
    )
    dataset, vocab = data.dataset, data.vocab
    epochs = config.num_train_steps // config.checkpoint_every

    with strategy.scope():
        model = build_pretrainer(config, vocab.size)
        warmup = config.warmup_steps if config.warmup_steps is not None else config.num_train_steps // 10
        optimizer = create_optimizer(
            config.learning_rate,
            config.num_train_steps,
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
        JsonHistory(os.path.join(config.output_dir, "history" + suffix + ".json")),
        keras.callbacks.TensorBoard(
            os.path.join(config.output_dir, "logs" + suffix), update_freq=config.checkpoint_every
        ),
        ResumableBackup(backup_dir),
    ]
    initial_path = os.path.join(config.output_dir, "initial_loss" + suffix + ".json")
    _say_where_training_starts(config, model, dataset, initial_epoch, epochs, initial_path)
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
    summary = _summary(config, model, vocab, time.time() - started, initial_path, suffix)
    if is_chief:
        # Weights, config and the run's vocabulary, without optimizer state (the backup keeps that).
        vocabulary = ModelVocabulary(tuple(vocab.tokens), config.lowercase)
        save_model(record_vocabulary(model, vocabulary), os.path.join(config.output_dir, "pretrainer.keras"))
        save_model(record_vocabulary(model.encoder, vocabulary), os.path.join(config.output_dir, "encoder.keras"))
        atomic_files.write_json(os.path.join(config.output_dir, "summary.json"), summary, indent=1)
    return summary


def _say_where_training_starts(config, model, dataset, initial_epoch, epochs, initial_path):
    """Log a finished, resumed or new run; a new one first records the untrained model's loss."""
    if initial_epoch >= epochs:
        logger.info(f"{config.output_dir} is complete ({config.num_train_steps} steps); nothing left to train.")
    elif initial_epoch:
        logger.info(
            f"Resuming after step {initial_epoch * config.checkpoint_every} (epoch {initial_epoch} of {epochs})"
        )
    else:
        # The untrained model's loss on the first batches: what training is measured against.
        initial = model.evaluate(dataset, steps=4, verbose=0, return_dict=True)
        atomic_files.write_json(initial_path, {k: float(v) for k, v in initial.items()})
        logger.info(
            f"Initial {config.recipe_spec.loss_key}: {_logged_metric(initial, config.recipe_spec.loss_key):.3f}"
        )
        logger.info(f"Training {config.num_train_steps} steps of {config.batch_size} sequences")


def _summary(config, model, vocab, seconds, initial_path, suffix):
    """The run's summary: steps, time, and the loss (and the recipe's reported metrics) before
    training, over the first epoch and over the last."""
    loss_key = config.recipe_spec.loss_key
    summary = {
        "steps": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
        "seconds_this_run": round(seconds, 1),
        "recipe": config.recipe,
        "loss_key": loss_key,
        "vocabulary_size": vocab.size,
    }
    with open(os.path.join(config.output_dir, "history" + suffix + ".json"), encoding="utf-8") as f:
        history = json.load(f)
    with open(initial_path, encoding="utf-8") as f:
        summary["initial_" + loss_key] = _logged_metric(json.load(f), loss_key)
    for key in (loss_key, *config.recipe_spec.report):
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

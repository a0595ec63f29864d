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
from bertlayers.networks.encoder_base import EncoderBase
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
    jit_compile: bool = option(False, "compile the train step with XLA")
    steps_per_execution: int = option(1, "steps per call into the compiled loop", POSITIVE_INT)
    strategy: str = option("default", "tf.distribute strategy", choices=STRATEGIES)
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
        if self.init is not None and not os.path.exists(self.init):
            raise FileNotFoundError(f"No checkpoint at {self.init} (--init).")
        if self.init is not None and (self.vocabulary or self.vocabulary_size):
            raise ValueError("--init brings the checkpoint's vocabulary: give no --vocabulary or --vocabulary_size.")
        if self.init is not None and not get_recipe(self.recipe).continues_checkpoint:
            raise ValueError(
                f"Recipe {self.recipe!r} cannot start from a checkpoint (--init); recipes that can: "
                f"{', '.join(init_recipes())}."
            )
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


def build_pretrainer(config: object, vocabulary_size: int, start: Optional["InitialWeights"] = None) -> keras.Model:
    """The recipe's pretrainer over the preset's architecture (random initialization), or over
    the architecture of `start` (a checkpoint's, `initial_weights`) with its weights."""
    recipe = config.recipe_spec
    if start is not None:
        return _pretrainer_from(config, start)
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


@dataclasses.dataclass(frozen=True)
class InitialWeights:
    """What continued pretraining (`--init`) starts from: the checkpoint's encoder, its masked-LM
    head where it has one, and its WordPiece vocabulary."""

    source: str
    encoder: keras.Model
    lm_head: Optional[keras.layers.Layer]
    vocabulary: ModelVocabulary


def initial_weights(source: str) -> InitialWeights:
    """The encoder, MLM head and vocabulary of `source`: a Hugging Face checkpoint folder (any
    registered model_type), a `.keras` model (a pretrainer, an encoder, a task model) or an
    examples/pretrain.py output folder (its pretrainer.keras). A ValueError names a checkpoint
    whose tokenizer is not a WordPiece vocabulary (the pretraining data path reads vocab.txt)."""
    from bertlayers.convert.loading import load_checkpoint, load_model_file
    from bertlayers.convert.model_files import recorded_vocabulary

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
    vocabulary = recorded_vocabulary(model) or recorded_vocabulary(encoder)
    if not isinstance(vocabulary, ModelVocabulary):
        kind = "none recorded" if vocabulary is None else f"{type(vocabulary).__name__} ({vocabulary.kind})"
        raise ValueError(
            f"{source}: continued pretraining reads a WordPiece vocabulary (vocab.txt), and this checkpoint's "
            f"tokenizer is {kind}; the pretraining data path does not read other tokenizers yet."
        )
    lm_head = getattr(model, "lm_head", None) if model is not encoder else None
    return InitialWeights(source, encoder, lm_head, vocabulary)


def check_start(config: object, start: InitialWeights) -> None:
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
    start, data_config = None, config
    if config.init is not None:  # loaded and checked before the run writes anything
        start = initial_weights(config.init)
        check_start(config, start)
    initial_epoch = ResumableBackup.restored_epoch(backup_dir)
    check_run_settings(config, trained=initial_epoch > 0)
    if start is not None:
        # The checkpoint's vocabulary is the run's: written beside the run, it keys the cached data.
        vocabulary_path = os.path.join(config.output_dir, "vocab.txt")
        atomic_files.write_text(vocabulary_path, "".join(token + "\n" for token in start.vocabulary.tokens))
        data_config = dataclasses.replace(
            config, init=None, vocabulary=vocabulary_path, lowercase=start.vocabulary.lowercase
        )

    data = pretraining_inputs(
        data_config,
        config.output_dir,
        config.recipe_spec.objective_for(config.recipe_options),
        config.batch_size,
        config.num_train_steps,
        skip_batches=initial_epoch * config.checkpoint_every,
    )
    dataset, vocab = data.dataset, data.vocab
    epochs = config.num_train_steps // config.checkpoint_every
    heldout = _heldout_batches(config, data_config, data.vocabulary)

    with strategy.scope():
        model = build_pretrainer(config, vocab.size, start)
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
    _say_where_training_starts(config, model, dataset, initial_epoch, epochs, initial_path, heldout)
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
    if heldout is not None:
        after = _heldout_loss(config, model, heldout)
        summary["heldout_before_" + config.recipe_spec.loss_key] = _read_json(initial_path)["heldout"]
        summary["heldout_after_" + config.recipe_spec.loss_key] = after
    if is_chief:
        # Weights, config and the run's vocabulary, without optimizer state (the backup keeps that).
        vocabulary = ModelVocabulary(tuple(vocab.tokens), data_config.lowercase)
        save_model(record_vocabulary(model, vocabulary), os.path.join(config.output_dir, "pretrainer.keras"))
        encoder = model.finished_encoder() if hasattr(model, "finished_encoder") else model.encoder
        save_model(record_vocabulary(encoder, vocabulary), os.path.join(config.output_dir, "encoder.keras"))
        atomic_files.write_json(os.path.join(config.output_dir, "summary.json"), summary, indent=1)
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
    return data.dataset, max(1, data.num_records // config.batch_size)


def _heldout_loss(config, model, heldout):
    dataset, steps = heldout
    logs = model.evaluate(dataset, steps=steps, verbose=0, return_dict=True)
    return _logged_metric(logs, config.recipe_spec.loss_key)


def _read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _say_where_training_starts(config, model, dataset, initial_epoch, epochs, initial_path, heldout=None):
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
        record = {k: float(v) for k, v in initial.items()}
        loss_key = config.recipe_spec.loss_key
        logger.info(f"Initial {loss_key}: {_logged_metric(initial, loss_key):.3f}")
        if heldout is not None:
            record["heldout"] = _heldout_loss(config, model, heldout)
            logger.info(f"Initial {loss_key} on {config.eval_corpus}: {record['heldout']:.3f}")
        atomic_files.write_json(initial_path, record)
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
        # The encoder fine-tuning starts from, and everything pretraining trains (heads, a generator).
        "encoder_parameters": int(model.encoder.count_params()),
        "pretrainer_parameters": int(model.count_params()),
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

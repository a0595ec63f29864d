"""Fitting a task model on its examples: the one path the fine-tuning runs (`bertlayers.runs`) and
the text-in task models (`bertlayers.tasks`) both train through.

Decided here once for both: the optimizer (AdamW, linear warmup and decay, weight decay off
LayerNorm and biases, optional layer-wise rates), the compile options the strategy allows, the
batches (cut to their longest example; random for training, sorted by length for validation;
each JAX process its share of every batch), validation after every epoch and the epoch kept (the
lowest validation loss), and the warning where too few steps are asked for.
"""

import dataclasses
import logging
import math

import keras

from bertlayers import backend
from bertlayers.startup import require_tensorflow
from bertlayers.training.callbacks import BestEpoch
from bertlayers.training.distribute import compile_options
from bertlayers.training.length_batching import length_batches, per_token_outputs
from bertlayers.training.optimization import create_optimizer
from bertlayers.training.sharding import devices_per_batch, process_share
from bertlayers.utils.options import check_options, option
from bertlayers.utils.validation import NON_NEGATIVE_FLOAT, POSITIVE_FLOAT, POSITIVE_INT, PROBABILITY, Range

__all__ = ["FitSettings", "compile_task_model", "fit_settings", "fit_task_model", "optimizer_steps"]

tf = require_tensorflow(__name__)

logger = logging.getLogger(__name__)

# Fewer optimizer steps than this rarely fine-tune anything: the fit says so.
FEW_STEPS = 100


@dataclasses.dataclass(frozen=True)
class FitSettings:
    """How a task model trains (each field range-checked when made; a ValueError names it)."""

    epochs: int = option(3, "passes over the training examples", POSITIVE_INT)
    batch_size: int = option(32, "examples per step", POSITIVE_INT)
    learning_rate: float = option(5e-5, "peak learning rate", POSITIVE_FLOAT)
    warmup_proportion: float = option(0.1, "share of the steps with linear warmup", PROBABILITY)
    weight_decay: float = option(0.01, "decoupled weight decay (not on LayerNorm or biases)", NON_NEGATIVE_FLOAT)
    layerwise_decay: float | None = option(None, "lower layers learn slower", Range(float, 0, 1, low_open=True))
    group_by_length: bool = option(False, "training batches of similar lengths")
    pad_to_sequence_length: bool = option(False, "training batches keep the inputs' full length")
    keep_best: bool = option(True, "with validation, end with the epoch of the lowest validation loss")
    early_stopping: int | None = option(None, "with validation, stop after N epochs without a lower loss", POSITIVE_INT)
    seed: int = option(0, "seed of the data order", Range(int))
    verbose: int = option(1, "0 silent, 1 progress bar, 2 one line per epoch", Range(int, 0, 2))

    def __post_init__(self):
        check_options(self)
        if self.group_by_length and self.pad_to_sequence_length:
            raise ValueError("group_by_length and pad_to_sequence_length exclude each other.")


def fit_settings(given: dict, **defaults) -> FitSettings:
    """`FitSettings` of a task's `defaults` changed by the keywords a caller `given` (a TypeError
    names one that is not a setting, with those that are)."""
    names = [field.name for field in dataclasses.fields(FitSettings)]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise TypeError(f"fit got {', '.join(unknown)}: not a fit setting; the settings are {', '.join(names)}.")
    return FitSettings(**{**defaults, **given})


def optimizer_steps(num_examples: int, settings: FitSettings) -> int:
    """The optimizer steps of `settings.epochs` passes over `num_examples`, with a warning where
    they are too few to fine-tune anything."""
    # Across processes a pass takes a multiple of the devices' count of examples (`fit_task_model`).
    batches = math.ceil((num_examples - num_examples % devices_per_batch()) / settings.batch_size)
    steps = settings.epochs * batches
    if steps < FEW_STEPS:
        logger.warning(
            f"Only {steps} optimizer steps ({settings.epochs} epochs of {batches} batches of {settings.batch_size}): "
            "fine-tuning usually takes a few hundred; raise the epochs or lower the batch size."
        )
    return steps


def compile_task_model(
    model: keras.Model, steps: int, settings: FitSettings, loss: keras.losses.Loss | dict | None = None
) -> keras.Model:
    """Compile `model` (under the strategy it was built in) with the fine-tuning optimizer
    scheduled over `steps` and the compile options that strategy allows, and `loss` (None: the
    model's default losses); returns it."""
    optimizer = create_optimizer(
        settings.learning_rate,
        steps,
        int(settings.warmup_proportion * steps),
        weight_decay=settings.weight_decay,
        layerwise_decay=settings.layerwise_decay,
        model=model,
    )
    model.compile(optimizer=optimizer, loss=loss, **compile_options(_strategy_of(model)))
    return model


def fit_task_model(
    model: keras.Model,
    train: tuple,
    settings: FitSettings,
    validation: tuple | None = None,
    callbacks: list | tuple = (),
) -> keras.callbacks.History:
    """`model.fit` on `train`, validated after every epoch on `validation` where given.

    Args:
      model: a compiled task model (`compile_task_model`).
      train, validation: (x, y, sample_weight): x the packer's `[N, S]` arrays, y and
        sample_weight dicts keyed by output name (sample_weight may be None).
      settings: the `FitSettings`.
      callbacks: more Keras callbacks (a run's history and TensorBoard logs).

    Training batches are random and cut to their longest example, as Hugging Face's padding
    collator makes them (`settings.pad_to_sequence_length` keeps the full length: the same
    arithmetic at the real tokens; `settings.group_by_length` groups similar lengths), unless a
    TPU strategy runs them (XLA wants fixed shapes); validation batches are sorted by length (the
    same metrics, less padding). With validation, `settings.keep_best` ends with the weights of
    the epoch with the lowest validation loss and `settings.early_stopping` N stops after N epochs
    without a lower one.
    """
    callbacks = list(callbacks)
    if validation is not None and (settings.keep_best or settings.early_stopping):
        callbacks.append(BestEpoch(settings.keep_best, settings.early_stopping or settings.epochs))
    fixed_shapes = isinstance(_strategy_of(model), tf.distribute.TPUStrategy)
    token_outputs = per_token_outputs(model)
    options = dict(epochs=settings.epochs, callbacks=callbacks, verbose=settings.verbose)
    train, validation = _with_weights(train), validation and _with_weights(validation)
    # Arrays in one process where batches keep their full length (TPUs need fixed shapes); else
    # `length_batches` (across JAX processes always, each process feeding its share of each batch).
    if (fixed_shapes or settings.pad_to_sequence_length) and backend.process_index_and_count()[1] == 1:
        if validation is not None and not fixed_shapes:
            validation = length_batches(*validation, batch_size=settings.batch_size, token_outputs=token_outputs)
        x, y, sample_weight = train
        return model.fit(
            x,
            y,
            sample_weight=sample_weight,
            batch_size=settings.batch_size,
            validation_data=validation,
            shuffle=True,
            **options,
        )

    def batches(data, **batching):
        dataset = length_batches(
            *data,
            batch_size=settings.batch_size,
            token_outputs=token_outputs,
            examples_multiple=devices_per_batch(),
            **batching,
        )
        # Each JAX process's share of every batch (refusing a batch size the devices do not divide).
        return process_share(dataset, settings.batch_size)

    data = batches(
        train,
        shuffle=True,
        group_by_length=settings.group_by_length,
        seed=settings.seed,
        cut=not settings.pad_to_sequence_length,
    )
    validation = None if validation is None else batches(validation)
    # The dataset reshuffles itself every epoch.
    return model.fit(data, validation_data=validation, shuffle=False, **options)


def _with_weights(data):
    """(x, y) or (x, y, sample_weight) as the three."""
    if not isinstance(data, tuple) or len(data) not in (2, 3):
        raise TypeError(f"Expected (x, y) or (x, y, sample_weight), got a {type(data).__name__}.")
    return data if len(data) == 3 else (*data, None)


def _strategy_of(model):
    # Under JAX Keras models have no tf.distribute strategy: the default one.
    return getattr(model, "distribute_strategy", None) or tf.distribute.get_strategy()

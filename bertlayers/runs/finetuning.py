"""A fine-tuning run's training: the task model over the run's encoder, fitted as every task model
is (`bertlayers.training.task_fitting`), with the run's history, TensorBoard logs and `model.keras`."""

import os
from collections.abc import Callable

import keras

from bertlayers.convert.loading import load_encoder
from bertlayers.convert.model_files import record_tokenizer, save_model
from bertlayers.networks import reinitialized
from bertlayers.networks.input_limits import input_limits
from bertlayers.networks.lora import enable_lora, save_adapter
from bertlayers.runs.finetuning_config import FinetuningConfig, check_config, encoder_source
from bertlayers.startup import require_tensorflow
from bertlayers.training.callbacks import JsonHistory, StopOnDivergence
from bertlayers.training.task_fitting import compile_task_model, fit_task_model, optimizer_steps

__all__ = ["finetune"]

tf = require_tensorflow(__name__)

ADAPTER_FILE = "lora_adapter.safetensors"


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

    It trains as every task model does (`bertlayers.training.task_fitting`: the optimizer, the
    batches cut to their longest example, the validation and the epoch kept), with the run's
    history (`history.json`) and TensorBoard logs (`logs/`) in `config.output_dir`.

    With `config.lora_rank` only LoRA adapters on the encoder and the head train
    (`bertlayers.networks.lora`); they are also saved alone, to `<output_dir>/lora_adapter.safetensors`.

    Returns:
      The trained model, also saved atomically to `<output_dir>/model.keras` (no optimizer state;
      the vocabulary recorded in it; LoRA adapters folded into the kernels).
    """
    check_config(config)
    num_examples = num_examples or len(next(iter(train[0].values())))
    settings = config.fit_settings()
    with strategy.scope():
        model, tokenizer = _task_model(config, build_model)
        compile_task_model(model, optimizer_steps(num_examples, settings), settings)
    callbacks = [
        StopOnDivergence(),  # first: before the history records a loss that is not a number
        JsonHistory(os.path.join(config.output_dir, "history.json")),
        keras.callbacks.TensorBoard(os.path.join(config.output_dir, "logs")),
    ]
    fit_task_model(model, train, settings, validation, callbacks)
    # For serving: weights, config and the tokenizer (the resumable state is the backup's job).
    save_model(
        record_tokenizer(model, tokenizer),
        os.path.join(config.output_dir, "model.keras"),
        settings=config.model_settings(),
    )
    if config.lora_rank is not None:  # what the run changed, alone: a small file (load_adapter)
        save_adapter(model, os.path.join(config.output_dir, ADAPTER_FILE), base=encoder_source(config))
    return model


def _task_model(config, build_model):
    """The task model over the run's encoder, and the run's tokenizer (checked against the
    encoder before any training)."""
    tokenizer = config.tokenizer
    encoder = load_encoder(encoder_source(config), dtype=config.precision, tokenizer=tokenizer)
    input_limits(encoder).check_sequence_length(config.sequence_length)
    tokenizer.in_graph(encoder.config.vocabulary_size)  # fits, before any training
    if config.random_init:
        encoder = reinitialized(encoder, seed=config.seed)
    model = build_model(encoder)
    if config.freeze_layers is not None:
        encoder.freeze_lower_layers(config.freeze_layers)
    if config.lora_rank is not None:
        enable_lora(model, config.lora_rank, config.lora_targets, config.lora_alpha)
    return model, tokenizer

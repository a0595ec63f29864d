"""Low-rank adaptation (LoRA; Hu et al., 2021) of an encoder's projections, with Keras's own adapters.

`enable_lora` gives the chosen `Dense` / `EinsumDense` projections of every transformer block a
rank-r update W + (alpha / r)·A·B (Keras's `enable_lora`: A `he_uniform`, B zeros, so training
starts from the encoder as it was) and freezes every other weight of the encoder; what is built
on the encoder (a task head) trains as usual, as Hugging Face PEFT trains a task model's head
beside its adapters. Only A, B and the head change, so they are all a task needs to keep:
`save_adapter` writes them to one small safetensors file, `load_adapter` puts them back on a model
of the same shape, `TaskAdapters` keeps several of them for one encoder and switches by name
(Jina v3's pattern: one encoder, an adapter a task), and `merge_lora` folds them into the kernels
for export (the served model computes W' = W + (alpha / r)·A·B once, not a detour a call).

The projections are named as every family's blocks name them: `query`, `key`, `value` and
`attention_output` in the attention layer, and `feed_forward` for every dense layer of the
feed-forward network (BERT's intermediate and output, the gated networks' gate, up and output).
Hu et al. adapt the query and value projections (PEFT's default for BERT too): the default here.
"""

import contextlib
import json
import logging
import os

import keras
import numpy as np
from keras import ops

from bertlayers import backend
from bertlayers.utils import atomic_files

logger = logging.getLogger(__name__)

ATTENTION = ("query", "key", "value", "attention_output")
TARGETS = (*ATTENTION, "feed_forward")
DEFAULT_TARGETS = ("query", "value")
# The adapter file's own format (not PEFT's adapter_model.safetensors, whose names and layout are
# transformers' modules'): tensors by Keras weight path, the settings in the file's metadata.
FORMAT = "bertlayers-lora"

__all__ = [
    "DEFAULT_TARGETS",
    "TARGETS",
    "TaskAdapters",
    "adapter_weights",
    "enable_lora",
    "load_adapter",
    "lora_layers",
    "merge_lora",
    "merged_lora",
    "save_adapter",
]


def parse_targets(targets: str | tuple | list) -> tuple:
    """`targets` ("query,value", "attention", "all", or a sequence of names) as a tuple of
    `TARGETS`; a ValueError names one that is not a projection."""
    names = [t.strip() for t in targets.split(",")] if isinstance(targets, str) else list(targets)
    expanded = []
    for name in names:
        group = {"attention": ATTENTION, "all": TARGETS}.get(name, (name,))
        for target in group:
            if target not in TARGETS:
                raise ValueError(
                    f"LoRA target {name!r} is not a projection; the targets are {', '.join(TARGETS)}, "
                    "or the groups attention and all."
                )
            if target not in expanded:
                expanded.append(target)
    if not expanded:
        raise ValueError("LoRA needs at least one target projection.")
    return tuple(expanded)


def _encoders_of(model):
    """Every encoder `model` holds (an asymmetric dual encoder has two), or `model` itself."""
    by_prefix = getattr(model, "encoders_by_input_prefix", None)
    encoders = (
        list({id(e): e for e in by_prefix().values()}.values()) if by_prefix else [getattr(model, "encoder", model)]
    )
    for encoder in encoders:
        if not hasattr(encoder, "transformer_layers"):
            raise TypeError(
                f"{type(model).__name__} {model.name!r} has no encoder with transformer blocks to adapt "
                "(a model of bertlayers' encoders, or one of them)."
            )
    return encoders


def _projections(block):
    """{target: [layer]} of one transformer block's `Dense` / `EinsumDense` projections."""
    found = {}
    for layer in backend.flatten_layers(block, include_self=False):
        if not isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense)):
            continue
        parts = layer.path.split("/")
        target = parts[-1] if parts[-1] in ATTENTION and "self_attention" in parts else "feed_forward"
        found.setdefault(target, []).append(layer)
    return found


def enable_lora(
    model: keras.Model, rank: int, targets: str | tuple = DEFAULT_TARGETS, alpha: float | None = None
) -> keras.Model:
    """Give `model`'s encoder rank-`rank` adapters on `targets` and freeze its other weights.

    Args:
      model: an encoder, or a model built on encoders (each of them adapted: a dual encoder's query
        and passage encoders); built.
      rank: the adapters' rank r (4 to 16 is usual).
      targets: projections to adapt (`TARGETS`, or "attention" / "all"); default query and value.
      alpha: the update's scale is alpha / r (default r: a scale of 1, Keras's and PEFT's default).

    Call it before `compile` (Keras reads `trainable` there). Returns `model`.
    """
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"LoRA rank must be a positive integer, got {rank!r}.")
    if alpha is not None and not alpha > 0:
        raise ValueError(f"LoRA alpha must be positive, got {alpha!r}.")
    targets = parse_targets(targets)
    encoders = _encoders_of(model)
    if lora_layers(model):
        raise ValueError(f"{model.name!r} has LoRA adapters already: enable them once, on the model as built.")
    chosen = []
    for block in (block for encoder in encoders for block in encoder.transformer_layers):
        found = _projections(block)
        missing = [t for t in targets if t not in found]
        if missing:
            raise ValueError(
                f"{type(block).__name__} {block.name!r} has no {', '.join(missing)} projection to adapt "
                f"(its dense projections: {', '.join(sorted(found)) or 'none'}); choose among those."
            )
        chosen += [layer for target in targets for layer in found[target]]
    for variable in (v for encoder in encoders for v in encoder.weights):  # the encoders as they were; heads train
        variable.trainable = False
    for layer in chosen:
        layer.enable_lora(rank, lora_alpha=alpha)
    trained = sum(int(np.prod(v.shape)) for v in model.trainable_weights)
    total = sum(int(np.prod(v.shape)) for v in model.weights)
    logger.info(
        f"LoRA rank {rank} on {', '.join(targets)} ({len(chosen)} projections): "
        f"{trained:,} of {total:,} weights train ({100 * trained / total:.2f}%)."
    )
    return model


def lora_layers(model: keras.Model) -> list:
    """The layers of `model` whose LoRA adapters are on."""
    return [layer for layer in backend.flatten_layers(model) if getattr(layer, "lora_enabled", False)]


def _settings(model):
    layers = lora_layers(model)
    if not layers:
        raise ValueError(f"{model.name!r} has no LoRA adapters (bertlayers.training.lora.enable_lora).")
    return {"rank": layers[0].lora_rank, "alpha": layers[0].lora_alpha, "projections": len(layers)}


def adapter_weights(model: keras.Model) -> dict:
    """{weight path: array} of what a LoRA fine-tune changes: the adapters and the trainable
    weights outside the encoder (the task head)."""
    _settings(model)
    return {variable.path: np.asarray(variable) for variable in model.trainable_weights}


def save_adapter(model: keras.Model, path: str, **metadata) -> str:
    """Write `adapter_weights(model)` to the safetensors file `path` (atomically), with the
    adapters' rank, alpha and `metadata` (strings: a task name, the base checkpoint) in it."""
    from safetensors.numpy import save

    settings = {**_settings(model), **metadata}
    blob = save(adapter_weights(model), metadata={"format": FORMAT, "settings": json.dumps(settings)})
    atomic_files.write_bytes(path, blob)
    return path


def _read_adapter(path):
    from safetensors import safe_open

    if not os.path.isfile(path):
        raise FileNotFoundError(f"No LoRA adapter file at {path}.")
    with safe_open(path, framework="numpy") as f:
        header = f.metadata() or {}
        if header.get("format") != FORMAT:
            raise ValueError(f"{path} is not a bertlayers LoRA adapter (its format is {header.get('format')!r}).")
        return {name: f.get_tensor(name) for name in f.keys()}, json.loads(header["settings"])


def load_adapter(model: keras.Model, source: str | dict) -> keras.Model:
    """Put a saved adapter (a `save_adapter` file, or `adapter_weights`' dict) on `model`, a model
    of the same shape with adapters of the same rank on the same projections. Every weight is
    checked (name, shape) before any is assigned, so a refused adapter leaves the model as it was."""
    settings = _settings(model)
    where = source if isinstance(source, str) else "the adapter given"
    if isinstance(source, str):
        weights, saved = _read_adapter(source)
        for key in ("rank", "projections"):
            if saved[key] != settings[key]:
                raise ValueError(
                    f"{where} has {key} {saved[key]}, the model's adapters {settings[key]}: "
                    "enable_lora with the rank and targets the adapter was trained with."
                )
    else:
        weights = source
    variables = {variable.path: variable for variable in model.trainable_weights}
    if set(weights) != set(variables):
        extra, missing = sorted(set(weights) - set(variables)), sorted(set(variables) - set(weights))
        raise ValueError(
            f"{where} does not fit {model.name!r}: "
            + "; ".join(
                part
                for part in (
                    extra and f"weights the model does not train: {', '.join(extra[:3])}",
                    missing and f"trained weights it lacks: {', '.join(missing[:3])}",
                )
                if part
            )
        )
    for name, value in weights.items():
        if tuple(value.shape) != tuple(variables[name].shape):
            raise ValueError(f"{where}: {name} has shape {tuple(value.shape)}, the model's {variables[name].shape}.")
    for name, value in weights.items():
        variables[name].assign(value)
    return model


def merge_lora(model: keras.Model) -> keras.Model:
    """Fold every adapter into its kernel (W' = W + (alpha / r)·A·B, in float32) and turn the
    adapters off, in place: the model computes what it computed, without the adapters' detour
    (what an export serves). The steps Keras traced for `model` are dropped (they would add the
    adapters again); merge a task model, not only its encoder, once it has been fitted or called
    by `predict`. Returns `model`."""
    for layer in lora_layers(model):
        if layer.quantization_mode is not None:
            raise ValueError(f"{layer.path} is quantized ({layer.quantization_mode}): merge its adapters before.")
        scale = layer.lora_alpha / layer.lora_rank
        delta = ops.matmul(ops.cast(layer.lora_kernel_a, "float32"), ops.cast(layer.lora_kernel_b, "float32"))
        backend.fold_lora(layer, delta * scale)
    backend.forget_traced_steps(model)
    return model


@contextlib.contextmanager
def merged_lora(model: keras.Model):
    """`model` with its adapters folded into its kernels for the block (`merge_lora`), then put
    back exactly as it was: what a saved file or an export of a LoRA model holds (Keras's own
    saving folds them too, but at the compute dtype: bfloat16 kernels under mixed precision)."""
    layers = lora_layers(model)
    if not layers:
        yield model
        return
    kept = [(layer, np.asarray(backend.stored_kernel(layer)), layer.lora_rank) for layer in layers]
    # The steps traced with the adapters are right again afterwards: put back as they were (a fit
    # whose callback saves the model reads its train step again at the next batch).
    traced = backend.forget_traced_steps(model)
    try:
        merge_lora(model)
        yield model
    finally:
        for layer, kernel, rank in kept:
            backend.unfold_lora(layer, kernel, rank)
        backend.restore_traced_steps(traced)


class TaskAdapters:
    """Several task adapters for one LoRA model, each selected by name (one encoder in memory,
    an adapter a task, as Jina v3 serves its tasks).

    >>> adapters = TaskAdapters(model, {"classification": "cls.safetensors", "retrieval": "ret.safetensors"})
    >>> adapters.select("retrieval")  # the model now computes with the retrieval adapter
    """

    def __init__(self, model: keras.Model, sources: dict | None = None) -> None:
        self.model = model
        self._weights = {}
        for name, source in (sources or {}).items():
            self.add(name, source)
        self.selected = None

    @property
    def names(self) -> list:
        return list(self._weights)

    def add(self, name: str, source: str | dict | None = None) -> None:
        """Keep the adapter `source` (a file or `adapter_weights` dict; None: what the model holds
        now) under `name`, checked against the model."""
        weights = adapter_weights(self.model) if source is None else source
        if isinstance(weights, str):
            weights, _ = _read_adapter(weights)
            current = adapter_weights(self.model)
            load_adapter(self.model, weights)  # checks the fit ...
            load_adapter(self.model, current)  # ... and leaves the model as it was
        self._weights[name] = {k: np.asarray(v) for k, v in weights.items()}

    def select(self, name: str) -> keras.Model:
        """Put the adapter `name` on the model; returns the model."""
        if name not in self._weights:
            raise KeyError(f"No adapter named {name!r}; the adapters are {', '.join(self._weights) or 'none'}.")
        load_adapter(self.model, self._weights[name])
        self.selected = name
        return self.model

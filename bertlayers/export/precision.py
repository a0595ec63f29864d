"""The precision a model is served in: float32, a bfloat16 copy of a library model, or a copy
with int8 weights (Keras's own quantization)."""

import collections
import logging
import re
import warnings

from bertlayers import backend
from bertlayers.convert.model_files import record_tokenizer, recorded_tokenizer
from bertlayers.networks.encoder_base import EncoderBase

logger = logging.getLogger(__name__)

PRECISIONS = ("float32", "bfloat16", "int8")


def in_precision(model, precision):
    """`model` itself for float32; for bfloat16 a copy of a library model built with a bfloat16
    encoder (the heads follow the encoder's dtype policy) holding the same weights, rounded; for
    int8 a copy with int8 weights (`_int8_copy`). A copy carries the tokenizer recorded with `model`."""
    return _with_tokenizer_of(model, _in_precision(model, precision))


def _with_tokenizer_of(model, copy):
    """`copy`, with the tokenizer recorded with `model` (a copy tokenizes as its model does)."""
    tokenizer = recorded_tokenizer(model)
    return record_tokenizer(copy, tokenizer) if tokenizer is not None and copy is not model else copy


def _in_precision(model, precision):
    if precision not in PRECISIONS:
        raise ValueError(f"Unknown precision {precision!r}; expected one of {PRECISIONS}.")
    if precision == "float32":
        return model
    if precision == "int8":
        return _int8_copy(model)
    config = model.get_config()
    if isinstance(model, EncoderBase):
        config["dtype"] = precision
    elif isinstance(getattr(model, "encoder", None), EncoderBase) and "encoder" in config:
        config["encoder"] = {**config["encoder"], "config": {**config["encoder"]["config"], "dtype": precision}}
    else:
        raise ValueError(
            f"precision='bfloat16' rebuilds the library's encoders and task models; for {model.name!r} build "
            "the model with dtype='bfloat16' (or a bfloat16 dtype policy) and export it as float32."
        )
    copy = type(model).from_config(config)
    copy.set_weights(model.get_weights())
    return copy


def _int8_copy(model):
    """A copy of `model` whose dense, einsum and embedding layers hold int8 weights (Keras's
    `quantize("int8")`: a scale a output channel, the inputs quantized a row at run time); every
    other layer keeps its float weights, named in the log."""
    copy = type(model).from_config(model.get_config())
    copy.set_weights(model.get_weights())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backend.quantize(copy, "int8")
    # Keras warns once a layer it cannot quantize; those holding weights stay float.
    kept = collections.Counter()
    unquantized = {
        m.group(1) for w in caught if (m := re.match(r"Layer (\w+) does not have a .quantize", str(w.message)))
    }
    quantized = 0
    for layer in backend.flatten_layers(copy, include_self=False):
        if getattr(layer, "quantization_mode", None) == "int8":
            quantized += 1
        elif type(layer).__name__ in unquantized and layer.weights and not backend.flatten_layers(layer, False, False):
            kept[type(layer).__name__] += 1
    if not quantized:
        raise ValueError(f"{model.name!r} has no dense, einsum or embedding layer to hold int8 weights.")
    logger.info(
        f"int8 weights in {quantized} layers; kept in float: "
        + (", ".join(f"{name} x{count}" for name, count in sorted(kept.items())) or "none")
    )
    return copy

"""The precision a model is served in: float32, or a bfloat16 copy of a library model."""

from bertlayers.networks.encoder_base import EncoderBase

PRECISIONS = ("float32", "bfloat16")


def in_precision(model, precision):
    """`model` itself for float32; for bfloat16 a copy of a library model built with a bfloat16
    encoder (the heads follow the encoder's dtype policy) holding the same weights, rounded."""
    if precision not in PRECISIONS:
        raise ValueError(f"Unknown precision {precision!r}; expected one of {PRECISIONS}.")
    if precision == "float32":
        return model
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

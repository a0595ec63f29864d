"""Find a pretrained encoder wherever a user keeps one."""

import os

import keras

from bertlayers.networks.encoder_base import EncoderBase


def load_encoder(source, dtype=None):
    """A pretrained encoder from `source`:

      - a Hugging Face BERT folder (config.json + model.safetensors),
      - an `encoder.keras` file, or any `.keras` model with an `.encoder` (a pretrainer, a task
        model),
      - an examples/pretrain.py output folder (its `encoder.keras`).
    """
    from bertlayers.convert.huggingface import load_huggingface_bert

    if os.path.isdir(source):
        if os.path.isfile(os.path.join(source, "config.json")):
            return load_huggingface_bert(source, dtype=dtype)
        if os.path.isfile(os.path.join(source, "encoder.keras")):
            return load_encoder(os.path.join(source, "encoder.keras"), dtype=dtype)
        raise FileNotFoundError(f"{source} holds neither a Hugging Face checkpoint (config.json) nor encoder.keras.")
    if not os.path.isfile(source):
        raise FileNotFoundError(f"No encoder at {source}.")
    if not source.endswith(".keras"):
        raise ValueError(f"{source}: expected a .keras file or a checkpoint folder.")
    model = keras.saving.load_model(source, safe_mode=True)
    encoder = model if isinstance(model, EncoderBase) else getattr(model, "encoder", None)
    if not isinstance(encoder, EncoderBase):
        raise ValueError(f"{source} holds a {type(model).__name__}, which has no bertlayers encoder.")
    if dtype is not None and keras.dtype_policies.get(dtype).name != encoder.layer_dtype_policy.name:
        rebuilt = type(encoder).from_config({**encoder.get_config(), "dtype": dtype})
        rebuilt.set_weights(encoder.get_weights())
        return rebuilt
    return encoder


def reinitialized(encoder, seed=None):
    """An encoder of the same architecture with fresh random weights (the no-pretraining baseline)."""
    if seed is not None:
        keras.utils.set_random_seed(seed)
    return type(encoder).from_config(encoder.get_config())

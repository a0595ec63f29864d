"""Networks: layers composed into functional encoder models."""

from bertlayers.networks.albert_encoder import AlbertEncoder
from bertlayers.networks.bert_encoder import BertEncoder
from bertlayers.networks.encoder_base import ENCODERS, EncoderBase, reinitialized
from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.networks.presets import get_preset, preset_names

# Encoders that live in their family's folder; `import bertlayers` sets them here.
FROM_FAMILIES = {"XLNetEncoder": "bertlayers.families.xlnet"}

def build_encoder(config, **kwargs):
    """An encoder from an `EncoderConfig` or a preset name; kwargs go to the model (dtype, name)."""
    if isinstance(config, str):
        config = get_preset(config)
    if config.architecture not in ENCODERS:
        raise ValueError(f"Unknown architecture {config.architecture!r}; registered: {', '.join(sorted(ENCODERS))}.")
    return ENCODERS[config.architecture].from_encoder_config(config, **kwargs)


__all__ = [
    "AlbertEncoder",
    "BertEncoder",
    "ENCODERS",
    "EncoderBase",
    "EncoderConfig",
    "XLNetEncoder",
    "build_encoder",
    "get_preset",
    "preset_names",
    "reinitialized",
]

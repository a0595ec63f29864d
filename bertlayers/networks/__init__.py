"""Networks: layers composed into functional encoder models.

The encoder core (`EncoderBase`, its config, block parts and stack) names no family: each
family's encoder class lives in its folder (`bertlayers.families.bert.BertEncoder`, ...) and
registers its architecture name here when defined (`ENCODERS`, used by `build_encoder`).
"""

from bertlayers.networks.block_parts import register_attention, register_feed_forward, register_normalization
from bertlayers.networks.block_stack import BlockStack, StackOutputs
from bertlayers.networks.encoder_base import ENCODERS, EncoderBase, reinitialized
from bertlayers.networks.encoder_config import EncoderConfig, LayerSettings
from bertlayers.networks.presets import get_preset, preset_names


def build_encoder(config: EncoderConfig | str, **kwargs) -> EncoderBase:
    """An encoder from an `EncoderConfig` or a preset name; kwargs go to the model (dtype, name)."""
    if isinstance(config, str):
        config = get_preset(config)
    if config.architecture not in ENCODERS:
        raise ValueError(f"Unknown architecture {config.architecture!r}; registered: {', '.join(sorted(ENCODERS))}.")
    return ENCODERS[config.architecture].from_encoder_config(config, **kwargs)


__all__ = [
    "BlockStack",
    "ENCODERS",
    "EncoderBase",
    "EncoderConfig",
    "LayerSettings",
    "StackOutputs",
    "build_encoder",
    "get_preset",
    "preset_names",
    "register_attention",
    "register_feed_forward",
    "register_normalization",
    "reinitialized",
]

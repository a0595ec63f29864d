"""Checkpoint converters: real pretrained weights into bertlayers models."""

from bertlayers.convert.huggingface import encoder_config_from_huggingface, load_huggingface_bert
from bertlayers.convert.weight_map import CheckpointMismatchError

__all__ = ["CheckpointMismatchError", "encoder_config_from_huggingface", "load_huggingface_bert"]

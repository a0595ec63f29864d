"""Checkpoint converters and model loading: pretrained weights into bertlayers models.

The machinery every family's loader uses; each family's loaders live in its folder
(`bertlayers.families.bert.load_huggingface_bert`, ...) and register its model_type here.
"""

from bertlayers.convert.google import load_google_checkpoint
from bertlayers.convert.huggingface import encoder_config_from_huggingface, register_huggingface_family
from bertlayers.convert.loading import Checkpoint, head_pooling, load_checkpoint, load_encoder, load_model_file
from bertlayers.convert.model_files import ModelTokenizer, record_tokenizer, recorded_tokenizer, save_model
from bertlayers.convert.saving import save_huggingface
from bertlayers.convert.weight_map import CheckpointMismatchError

__all__ = [
    "Checkpoint",
    "CheckpointMismatchError",
    "ModelTokenizer",
    "encoder_config_from_huggingface",
    "load_checkpoint",
    "load_encoder",
    "load_google_checkpoint",
    "load_model_file",
    "record_tokenizer",
    "recorded_tokenizer",
    "register_huggingface_family",
    "save_huggingface",
    "save_model",
    "head_pooling",
]

"""Checkpoint converters and model loading: pretrained weights into bertlayers models."""

from bertlayers.convert.google import load_google_albert, load_google_bert
from bertlayers.convert.huggingface import encoder_config_from_huggingface, load_huggingface_bert
from bertlayers.convert.loading import Checkpoint, load_checkpoint, load_encoder, load_model_file
from bertlayers.convert.model_files import ModelVocabulary, record_vocabulary, recorded_vocabulary, save_model
from bertlayers.convert.weight_map import CheckpointMismatchError

# Loaders that live in their family's folder; `import bertlayers` sets them here.
FROM_FAMILIES = {
    "load_huggingface_albert": "bertlayers.families.albert",
    "load_huggingface_distilbert": "bertlayers.families.distilbert",
    "load_huggingface_electra": "bertlayers.families.electra",
    "load_huggingface_roberta": "bertlayers.families.roberta",
    "load_huggingface_xlnet": "bertlayers.families.xlnet",
}

__all__ = [
    "Checkpoint",
    "CheckpointMismatchError",
    "ModelVocabulary",
    "encoder_config_from_huggingface",
    "load_google_albert",
    "load_google_bert",
    "load_checkpoint",
    "load_huggingface_albert",
    "load_huggingface_bert",
    "load_huggingface_distilbert",
    "load_huggingface_electra",
    "load_huggingface_roberta",
    "load_huggingface_xlnet",
    "load_encoder",
    "load_model_file",
    "record_vocabulary",
    "recorded_vocabulary",
    "save_model",
]

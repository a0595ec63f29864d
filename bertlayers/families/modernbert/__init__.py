"""ModernBERT (Warner et al. 2024) and the models built on it (mmBERT, the Ettin encoders): its
encoder, presets and Hugging Face checkpoints (model_type "modernbert").

Importing it registers the encoder (architecture "modernbert"), its presets, the model_type and
the pretraining recipe "modernbert".
"""

from bertlayers.families.modernbert import presets  # noqa: F401  (registers the presets)
from bertlayers.families.modernbert.encoder import ModernBertEncoder
from bertlayers.families.modernbert.presets import modernbert_config
from bertlayers.startup import tensorflow_available

if tensorflow_available():  # checkpoint folders come with their tokenizer
    from bertlayers.families.modernbert.checkpoint import (
        load_huggingface_modernbert,
        modernbert_config_from_huggingface,
    )
    from bertlayers.families.modernbert.recipe import OBJECTIVE, RECIPE, modernbert_sized_like

__all__ = [
    "OBJECTIVE",
    "RECIPE",
    "ModernBertEncoder",
    "load_huggingface_modernbert",
    "modernbert_config",
    "modernbert_config_from_huggingface",
    "modernbert_sized_like",
]

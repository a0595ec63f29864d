"""EuroBERT (Boizard et al. 2025): its encoder (Llama-style blocks, grouped-query attention),
presets and Hugging Face checkpoints (model_type "eurobert").

Importing it registers the encoder (architecture "eurobert"), its presets and the model_type.
"""

from bertlayers.families.eurobert import presets  # noqa: F401  (registers the presets)
from bertlayers.families.eurobert.encoder import EuroBertEncoder
from bertlayers.families.eurobert.presets import eurobert_config
from bertlayers.startup import tensorflow_available

if tensorflow_available():  # checkpoint folders come with their tokenizer
    from bertlayers.families.eurobert.checkpoint import eurobert_config_from_huggingface, load_huggingface_eurobert

__all__ = ["EuroBertEncoder", "eurobert_config", "eurobert_config_from_huggingface", "load_huggingface_eurobert"]

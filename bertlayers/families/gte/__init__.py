"""GTE v1.5 (Li et al. 2023; `gte-base-en-v1.5`, `gte-large-en-v1.5`): its encoder, presets and
Hugging Face checkpoints (model_type "gte").

Importing it registers the encoder (architecture "gte"), its feed-forward kind
"gated_output_bias", its presets and the model_type.
"""

from bertlayers.families.gte import presets  # noqa: F401  (registers the presets)
from bertlayers.families.gte.encoder import GteEncoder
from bertlayers.families.gte.presets import gte_config
from bertlayers.startup import tensorflow_available

if tensorflow_available():  # checkpoint folders come with their tokenizer
    from bertlayers.families.gte.checkpoint import gte_config_from_huggingface, load_huggingface_gte

__all__ = ["GteEncoder", "gte_config", "gte_config_from_huggingface", "load_huggingface_gte"]

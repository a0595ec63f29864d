"""Gemma 3's text model made bidirectional (EmbeddingGemma): its layers (Gemma's RMSNorm, the
scaled embedding), encoder, preset and Hugging Face checkpoints (model_type "gemma3_text").

Importing it registers the encoder (architecture "gemma3"), the `gemma_rms_norm` normalization,
its preset and the model_type.
"""

from bertlayers.families.gemma3 import presets  # noqa: F401  (registers the preset)
from bertlayers.families.gemma3.encoder import Gemma3Encoder
from bertlayers.families.gemma3.layers import GemmaRMSNorm, ScaledTokenEmbedding
from bertlayers.families.gemma3.presets import gemma3_config
from bertlayers.startup import tensorflow_available

if tensorflow_available():
    from bertlayers.families.gemma3.checkpoint import gemma3_config_from_huggingface, load_huggingface_gemma3

__all__ = [
    "Gemma3Encoder",
    "GemmaRMSNorm",
    "ScaledTokenEmbedding",
    "gemma3_config",
    "gemma3_config_from_huggingface",
    "load_huggingface_gemma3",
]

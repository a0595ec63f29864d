"""Qwen3 read as an encoder (Qwen3-Embedding, Qwen3-Reranker): its encoder (causal Llama-style
blocks with query/key norms), presets and Hugging Face checkpoints (model_type "qwen3").

Importing it registers the encoder (architecture "qwen3"), its presets and the model_type.
"""

from bertlayers.families.qwen3 import presets  # noqa: F401  (registers the presets)
from bertlayers.families.qwen3.encoder import Qwen3Encoder
from bertlayers.families.qwen3.presets import qwen3_config
from bertlayers.startup import tensorflow_available

if tensorflow_available():  # checkpoint folders come with their tokenizer
    from bertlayers.families.qwen3.checkpoint import load_huggingface_qwen3, qwen3_config_from_huggingface

__all__ = ["Qwen3Encoder", "load_huggingface_qwen3", "qwen3_config", "qwen3_config_from_huggingface"]

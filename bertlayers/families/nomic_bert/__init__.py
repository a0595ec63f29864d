"""NomicBERT (Nussbaum et al. 2024; `nomic-embed-text-v1`, `-v1.5`): BERT's encoder with rotary
attention and SwiGLU (a `BertEncoder` configuration), its preset and Hugging Face checkpoints
(model_type "nomic_bert").

Importing it registers the preset and the model_type.
"""

from bertlayers.families.nomic_bert import presets  # noqa: F401  (registers the preset)
from bertlayers.families.nomic_bert.presets import nomic_bert_config
from bertlayers.startup import tensorflow_available

if tensorflow_available():  # checkpoint folders come with their tokenizer
    from bertlayers.families.nomic_bert.checkpoint import (
        load_huggingface_nomic_bert,
        nomic_bert_config_from_huggingface,
    )

__all__ = ["load_huggingface_nomic_bert", "nomic_bert_config", "nomic_bert_config_from_huggingface"]

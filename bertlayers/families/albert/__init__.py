"""ALBERT (Lan et al. 2019): its encoder (factorized embedding, shared layer groups), Hugging Face
and Google checkpoints, and SentencePiece text. Its objective is the recipe "albert" in
`bertlayers.families.bert` (BERT's, with sentence order).

Importing it registers the encoder (architecture "albert") and transformers' model_type "albert"
(loader and tokenizer).
"""

from bertlayers.families.albert import presets  # noqa: F401  (registers the presets)
from bertlayers.families.albert.encoder import AlbertEncoder
from bertlayers.startup import tensorflow_available

if tensorflow_available():  # checkpoint folders come with their tokenizer
    from bertlayers.families.albert.checkpoint import albert_config_from_huggingface, load_huggingface_albert
    from bertlayers.families.albert.google_checkpoint import load_google_albert
    from bertlayers.families.albert.tokenizer import albert_checkpoint_tokenizer

__all__ = [
    "AlbertEncoder",
    "albert_checkpoint_tokenizer",
    "albert_config_from_huggingface",
    "load_google_albert",
    "load_huggingface_albert",
]

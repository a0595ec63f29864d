"""ALBERT's (Lan et al. 2019) Hugging Face checkpoints and SentencePiece text. Its encoder
(factorized embedding, shared layer groups) is `bertlayers.networks.AlbertEncoder`, its
objective the recipe "albert" in `bertlayers.families.bert`, Google's TF1 checkpoints
`bertlayers.convert.load_google_albert`.

Importing it registers transformers' model_type "albert" (loader and tokenizer).
"""

from bertlayers.startup import tensorflow_available

if tensorflow_available():  # checkpoint folders come with their tokenizer
    from bertlayers.families.albert.checkpoint import albert_config_from_huggingface, load_huggingface_albert
    from bertlayers.families.albert.tokenizer import albert_checkpoint_tokenizer

__all__ = ["albert_checkpoint_tokenizer", "albert_config_from_huggingface", "load_huggingface_albert"]

"""DistilBERT's (Sanh et al. 2019) Hugging Face checkpoints: BERT's encoder without segment
embeddings or a pretrained pooler, WordPiece text packed as BERT's with every segment id 0.
Distilling a student of one's own is `bertlayers.models.Distiller`.

Importing it registers transformers' model_type "distilbert" (loader and tokenizer).
"""

from bertlayers.startup import tensorflow_available

if tensorflow_available():  # checkpoint folders come with their tokenizer
    from bertlayers.families.distilbert.checkpoint import (
        distilbert_config_from_huggingface,
        load_huggingface_distilbert,
    )
    from bertlayers.families.distilbert.tokenizer import distilbert_checkpoint_tokenizer

__all__ = ["distilbert_checkpoint_tokenizer", "distilbert_config_from_huggingface", "load_huggingface_distilbert"]

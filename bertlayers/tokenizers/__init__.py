"""Text to ids: every tokenizer format a checkpoint ships (WordPiece `vocab.txt`, byte-level BPE
`vocab.json` + `merges.txt`, SentencePiece, Gemma's byte-fallback BPE), the families' input
layouts, and the packers that make a model's inputs. Needs TensorFlow (the tokenizers are graph ops that export with a model)."""

from bertlayers.tokenizers.checkpoint_tokenizer import checkpoint_tokenizer
from bertlayers.tokenizers.in_graph_tokenizer import CheckpointTokenizer
from bertlayers.tokenizers.input_layout import InputLayout
from bertlayers.tokenizers.model_tokenizer import ModelTokenizer, model_tokenizer
from bertlayers.tokenizers.tokenizer import load_vocabulary
from bertlayers.utils.assets import bert_uncased_vocabulary

__all__ = [
    "CheckpointTokenizer",
    "InputLayout",
    "ModelTokenizer",
    "bert_uncased_vocabulary",
    "checkpoint_tokenizer",
    "load_vocabulary",
    "model_tokenizer",
]

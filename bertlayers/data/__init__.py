"""The former `bertlayers.data`, kept so that its import paths still work: its modules now live in
`bertlayers.tokenizers` (text to ids), `bertlayers.pretraining_data` (the record pipeline),
`bertlayers.task_data` (the task readers) and `bertlayers.utils` (text files, assets). Each old
module path names the new module (`bertlayers.data.squad_data` is `bertlayers.task_data.squad`).
Nothing in the library imports this package; it stands outside the tiers.
"""

import importlib
import sys

from bertlayers.tokenizers import (  # noqa: F401
    BertInputPacker,
    CheckpointTokenizer,
    InputLayout,
    ModelVocabulary,
    TokenizerFiles,
    checkpoint_tokenizer,
    load_vocabulary,
    text_tokenizer,
    wordpiece_tokenizer,
)
from bertlayers.utils.assets import asset_path, bert_uncased_vocabulary, minilm_path  # noqa: F401

# Former module -> where it lives now.
MOVED_MODULES = {
    "text_files": "bertlayers.utils.text_files",
    "assets": "bertlayers.utils.assets",
    "wordpiece": "bertlayers.tokenizers.wordpiece",
    "byte_level_bpe": "bertlayers.tokenizers.byte_level_bpe",
    "sentencepiece_model": "bertlayers.tokenizers.sentencepiece_model",
    "checkpoint_tokenizer": "bertlayers.tokenizers.checkpoint_tokenizer",
    "tokenizer": "bertlayers.tokenizers.tokenizer",
    "vocabulary": "bertlayers.tokenizers.vocabulary",
    "input_layout": "bertlayers.tokenizers.input_layout",
    "padding": "bertlayers.tokenizers.padding",
    "corpus": "bertlayers.pretraining_data.corpus",
    "pretraining_examples": "bertlayers.pretraining_data.examples",
    "mlm_masking": "bertlayers.pretraining_data.mlm_masking",
    "tfrecords": "bertlayers.pretraining_data.tfrecords",
    "pretraining_data": "bertlayers.pretraining_data.objectives",
    "pretraining_inputs": "bertlayers.pretraining_data.inputs",
    "squad_data": "bertlayers.task_data.squad",
    "ner_data": "bertlayers.task_data.ner",
    "classification_data": "bertlayers.task_data.classification",
    "multiple_choice_data": "bertlayers.task_data.multiple_choice",
    "retrieval_data": "bertlayers.task_data.retrieval",
    "multi_task_data": "bertlayers.task_data.multi_task",
}
for _old, _new in MOVED_MODULES.items():
    sys.modules[f"{__name__}.{_old}"] = globals()[_old] = importlib.import_module(_new)

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

"""ALBERT's text: its `spiece.model`, lower-cased and accent-stripped unless the checkpoint's
tokenizer_config.json says otherwise, packed as BERT's `[CLS] A [SEP] B [SEP]`."""

from bertlayers.tokenizers.checkpoint_tokenizer import (
    register_checkpoint_tokenizer,
    spiece_tokenizer,
)
from bertlayers.tokenizers.in_graph_tokenizer import CheckpointTokenizer
from bertlayers.tokenizers.input_layout import bert_layout


def albert_checkpoint_tokenizer(folder, config, tokenizer_config):
    tokenizer, special = spiece_tokenizer(
        folder,
        "albert",
        tokenizer_config.get("do_lower_case", True),
        strip_accents=not tokenizer_config.get("keep_accents", False),
    )
    layout = bert_layout(special("[CLS]"), special("[SEP]"), special("<pad>"))
    return CheckpointTokenizer(tokenizer, layout, len(tokenizer.pieces), "sentencepiece", unknown_id=special("<unk>"))


register_checkpoint_tokenizer("albert", albert_checkpoint_tokenizer, ["spiece.model"])

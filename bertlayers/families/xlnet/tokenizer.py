"""XLNet's text: its `spiece.model` and its layout, `A <sep> B <sep> <cls>`, padded on the left."""

from bertlayers.tokenizers.checkpoint_tokenizer import (
    register_checkpoint_tokenizer,
    spiece_tokenizer,
)
from bertlayers.tokenizers.in_graph_tokenizer import CheckpointTokenizer
from bertlayers.tokenizers.input_layout import InputLayout


def xlnet_input_layout(sep_id, cls_id, pad_id):
    """`A <sep> B <sep> <cls>`, segments 0, 1 and 2 for `<cls>`, padded on the left: XLNet
    summarizes a text from its last token, which left padding keeps in the last column."""
    return InputLayout((), (sep_id,), (sep_id, cls_id), pad_id, second_segment=1, end_segments=(None, 2), pad_left=True)


def xlnet_checkpoint_tokenizer(folder, config, tokenizer_config):
    """XLNet's SentencePiece (cased unless the checkpoint says otherwise) and layout."""
    tokenizer, special = spiece_tokenizer(folder, "xlnet", tokenizer_config.get("do_lower_case", False))
    layout = xlnet_input_layout(special("<sep>"), special("<cls>"), special("<pad>"))
    return CheckpointTokenizer(tokenizer, layout, len(tokenizer.pieces), "sentencepiece", unknown_id=special("<unk>"))


register_checkpoint_tokenizer("xlnet", xlnet_checkpoint_tokenizer, ["spiece.model"])

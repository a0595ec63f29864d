"""DeBERTa-v2/v3's text: its `spm.model` as transformers' `DebertaV2Tokenizer` reads it (runs of
whitespace collapsed, NFC, the SentencePiece pieces; `[PAD] [CLS] [SEP] [UNK] [MASK]` matched in the
text as whole tokens), packed as BERT's `[CLS] A [SEP] B [SEP]`."""

from bertlayers.tokenizers.checkpoint_tokenizer import (
    register_checkpoint_tokenizer,
    required_file,
    special_id,
)
from bertlayers.tokenizers.in_graph_tokenizer import CheckpointTokenizer
from bertlayers.tokenizers.input_layout import bert_layout
from bertlayers.tokenizers.sentencepiece_model import SentencePiece, read_sentencepiece_model
from bertlayers.tokenizers.tokenizer_json import WithAddedTokens

SPECIAL_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]")


def deberta_v2_checkpoint_tokenizer(folder, config, tokenizer_config):
    """The folder's `spm.model` (cased unless `do_lower_case`), its special pieces, and `[MASK]`
    after the last piece where the model has none (transformers adds it there: id 128,000 in v3)."""
    path = required_file(folder, "spm.model", "deberta-v2")
    if tokenizer_config.get("split_by_punct", False):
        raise ValueError(
            f"{folder}/tokenizer_config.json: split_by_punct true is not supported (no published DeBERTa-v2/v3 "
            "folder sets it)."
        )
    sentencepiece = SentencePiece(
        read_sentencepiece_model(path), lowercase=tokenizer_config.get("do_lower_case", False), normalization="nfc"
    )
    pieces = sentencepiece.pieces
    ids = {token: special_id(pieces.index, token, path) for token in SPECIAL_TOKENS if token != "[MASK]"}
    ids["[MASK]"] = pieces.index("[MASK]") if "[MASK]" in pieces else len(pieces)
    tokenizer = WithAddedTokens(sentencepiece, [{"content": token, "id": index} for token, index in ids.items()])
    segments = config.get("type_vocab_size", 0) > 0
    layout = bert_layout(ids["[CLS]"], ids["[SEP]"], ids["[PAD]"], segments=segments)
    size = max(len(pieces), ids["[MASK]"] + 1)
    return CheckpointTokenizer(tokenizer, layout, size, "sentencepiece", unknown_id=ids["[UNK]"])


register_checkpoint_tokenizer("deberta-v2", deberta_v2_checkpoint_tokenizer, ["spm.model"])

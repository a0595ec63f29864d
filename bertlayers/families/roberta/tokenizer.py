"""RoBERTa's byte-level BPE and XLM-R's SentencePiece, both packed `<s> A </s></s> B </s>`."""

from bertlayers.tokenizers.byte_level_bpe import ByteLevelBPE
from bertlayers.tokenizers.checkpoint_tokenizer import (
    register_checkpoint_tokenizer,
    required_file,
    special_id,
)
from bertlayers.tokenizers.in_graph_tokenizer import CheckpointTokenizer
from bertlayers.tokenizers.input_layout import InputLayout
from bertlayers.tokenizers.sentencepiece_model import SentencePiece, read_sentencepiece_model


def roberta_input_layout(bos_id, eos_id, pad_id):
    """`<s> A </s> </s> B </s>`, all segment 0 (RoBERTa has one segment embedding row)."""
    return InputLayout((bos_id,), (eos_id, eos_id), (eos_id,), pad_id, second_segment=0)


def roberta_checkpoint_tokenizer(folder, config, tokenizer_config):
    """RoBERTa's byte-level BPE (vocab.json + merges.txt)."""
    vocab_json = required_file(folder, "vocab.json", "roberta")
    tokenizer = ByteLevelBPE.from_files(vocab_json, required_file(folder, "merges.txt", "roberta"))
    special = lambda token: special_id(tokenizer.token_to_id, token, vocab_json)  # noqa: E731
    layout = roberta_input_layout(special("<s>"), special("</s>"), special("<pad>"))
    return CheckpointTokenizer(
        tokenizer, layout, tokenizer.vocabulary_size, "byte_level_bpe", unknown_id=special("<unk>")
    )


def xlm_roberta_checkpoint_tokenizer(folder, config, tokenizer_config):
    """XLM-R's SentencePiece in fairseq's id order: `<s> <pad> </s> <unk>`, the model's pieces
    one id later than SentencePiece's, `<mask>` last."""
    proto = read_sentencepiece_model(required_file(folder, "sentencepiece.bpe.model", "xlm-roberta"))
    import sentencepiece

    pieces = sentencepiece.SentencePieceProcessor(model_proto=proto).get_piece_size()
    # SentencePiece's <unk>, <s>, </s> are its ids 0, 1, 2; fairseq's 3, 0, 2.
    tokenizer = SentencePiece(proto, id_map=[3, 0, 2, *range(4, pieces + 1)])
    return CheckpointTokenizer(tokenizer, roberta_input_layout(0, 2, 1), pieces + 2, "sentencepiece", unknown_id=3)


register_checkpoint_tokenizer("roberta", roberta_checkpoint_tokenizer, ["vocab.json", "merges.txt"])
register_checkpoint_tokenizer("xlm-roberta", xlm_roberta_checkpoint_tokenizer, ["sentencepiece.bpe.model"])

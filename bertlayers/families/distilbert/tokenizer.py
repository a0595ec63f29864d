"""DistilBERT's text: BERT's WordPiece and `[CLS] A [SEP] B [SEP]`, every segment id 0 (it has
no segment embedding)."""

from bertlayers.tokenizers.checkpoint_tokenizer import register_checkpoint_tokenizer, wordpiece_checkpoint_tokenizer


def distilbert_checkpoint_tokenizer(folder, config, tokenizer_config):
    return wordpiece_checkpoint_tokenizer(folder, config, tokenizer_config, segments=False)


register_checkpoint_tokenizer("distilbert", distilbert_checkpoint_tokenizer, ["vocab.txt"])

"""WordPiece tokenization as graph ops that TF Serving links (BERT, ELECTRA, DistilBERT vocab.txt).

Only core TensorFlow ops and tensorflow-text ops present in TF Serving's bundled tf-text
(FastBertNormalize, FastWordpieceTokenizeWithOffsets); packing is `bertlayers.tokenizers.input_layout`. Ids equal keras-hub's WordPieceTokenizer's (tests/test_tokenizer.py).
"""

from bertlayers.startup import require_tensorflow
from bertlayers.tokenizers.input_layout import bert_layout
from bertlayers.tokenizers.tokenizer import load_vocabulary

tf = require_tensorflow(__name__)
import tensorflow_text as tf_text  # noqa: E402  (after the check above, which names what is missing)


class InGraphTokenizer(tf.Module):
    """Strings → WordPiece ids (and byte offsets into the original strings), inside a graph.

    One kernel splits words and pieces: FastWordpiece's own pre-tokenization is BERT's basic
    tokenizer (whitespace, every punctuation character, every CJK ideograph on its own), and one
    kernel costs a served request far less than a regex split followed by a ragged WordPiece.

    Args:
      vocabulary: a vocab.txt path or a list of tokens.
      lowercase: lower-case and strip accents first (uncased models).
    """

    # How BertInputPacker (keras-hub's packer), this tokenizer's Python twin, cuts a long pair.
    truncation = "waterfall"

    def __init__(self, vocabulary: str | list[str], lowercase: bool = True) -> None:
        super().__init__()
        tokens = load_vocabulary(vocabulary) if isinstance(vocabulary, str) else list(vocabulary)
        self.vocabulary = tokens
        self.lowercase = bool(lowercase)
        self.normalizer = tf_text.FastBertNormalizer(lower_case_nfd_strip_accents=self.lowercase)
        self.wordpiece = tf_text.FastWordpieceTokenizer(
            tokens,
            suffix_indicator="##",
            unknown_token="[UNK]",
            no_pretokenization=False,
            token_out_type=tf.int32,
            support_detokenization=False,
        )
        # A word's first piece is the only one without the "##" prefix.
        self._continues_word = tf.constant([t.startswith("##") for t in tokens])
        self.cls_id, self.sep_id, self.pad_id = (tokens.index(t) for t in ("[CLS]", "[SEP]", "[PAD]"))
        self.layout = bert_layout(self.cls_id, self.sep_id, self.pad_id)

    def tokenize_with_offsets(self, texts):
        """Ragged `[batch, pieces]`: ids, start and end byte offsets into the original `texts`,
        and whether each piece starts and ends its word (a word or a punctuation mark)."""
        normalized, origin = self.normalizer.normalize_with_offsets(texts)
        ids, starts, ends = self.wordpiece.tokenize_with_offsets(normalized)
        starts_word = tf.logical_not(tf.gather(self._continues_word, ids))
        # A piece ends its word where the next piece starts one; a row's first piece always
        # starts a word, so shifting the flat values by one is right across rows too.
        next_starts = tf.concat([starts_word.values[1:], tf.ones_like(starts_word.values[:1])], axis=0)
        ends_word = starts_word.with_flat_values(next_starts)
        # Normalized byte i came from original byte origin[i].
        original_starts = tf.gather(origin, starts, batch_dims=1)
        original_ends = tf.gather(origin, ends, batch_dims=1)
        return ids, original_starts, original_ends, starts_word, ends_word

    def tokenize(self, texts):
        """WordPiece ids of a batch of strings `[batch]`, ragged `[batch, (pieces)]`."""
        return self.wordpiece.tokenize(self.normalizer.normalize(texts))

"""WordPiece tokenization as graph ops that TF Serving links (BERT, ELECTRA, DistilBERT vocab.txt).

Only core TensorFlow ops and tensorflow-text ops present in TF Serving's bundled tf-text
(FastBertNormalize, FastWordpieceTokenizeWithOffsets); packing is `bertlayers.tokenizers.input_layout`.
Ids equal keras-hub's WordPieceTokenizer's (tests/test_tokenizer.py); pretraining records are made
with this tokenizer too, so training and serving give a text the same ids.
"""

from bertlayers.startup import require_tensorflow
from bertlayers.tokenizers.input_layout import bert_layout
from bertlayers.tokenizers.tokenizer import load_vocabulary

tf = require_tensorflow(__name__)
import tensorflow_text as tf_text  # noqa: E402  (after the check above, which names what is missing)

from bertlayers.utils.saved_module import SavedModule  # noqa: E402  (after the check, as above)

NORMALIZATIONS = ("tensorflow_text", "tokenizers")
# The tokenizers library's BertNormalizer (clean_text): control and format characters go (but
# tab, line feed, carriage return), other whitespace becomes a space.
_DROPPED = r"[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F\x{fffd}\p{Cf}\p{Co}]"
_WHITESPACE = r"[\t\n\r\p{Zs}]"


def bert_normalized(texts, lowercase):
    """`texts` as the tokenizers library's BertNormalizer leaves them (graph ops)."""
    texts = tf.strings.regex_replace(tf.strings.regex_replace(texts, _DROPPED, ""), _WHITESPACE, " ")
    if lowercase:  # strip_accents follows lowercase: NFD, then no combining marks, then lower case
        texts = tf.strings.regex_replace(tf_text.normalize_utf8(texts, "NFD"), r"\p{Mn}", "")
        texts = tf.strings.lower(texts, encoding="utf-8")
    return texts


class InGraphTokenizer(SavedModule):
    """Strings → WordPiece ids (and byte offsets into the original strings), inside a graph.

    One kernel splits words and pieces: FastWordpiece's own pre-tokenization is BERT's basic
    tokenizer (whitespace, every punctuation character, every CJK ideograph on its own), and one
    kernel costs a served request far less than a regex split followed by a ragged WordPiece.

    Args:
      vocabulary: a vocab.txt path or a list of tokens.
      lowercase: lower-case and strip accents first (uncased models).
      normalization: "tensorflow_text" (its FastBertNormalizer, keras-hub's: case folding and
        compatibility forms, "ß" → "ss", "…" → "...") or "tokenizers" (the tokenizers library's
        BertNormalizer, which a tokenizer.json names: control characters dropped, whitespace
        made spaces, accents stripped after NFD, then lower case; "ß", "…", "ﬁ" kept).
    """

    # How keras-hub's MultiSegmentPacker cuts a long pair (the library's WordPiece runs were trained so).
    truncation = "waterfall"

    def __init__(
        self, vocabulary: str | list[str], lowercase: bool = True, normalization: str = "tensorflow_text"
    ) -> None:
        super().__init__()
        tokens = load_vocabulary(vocabulary) if isinstance(vocabulary, str) else list(vocabulary)
        self.vocabulary = tokens
        self.lowercase = bool(lowercase)
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got {normalization!r}.")
        self.normalization = normalization
        self.normalizer = tf_text.FastBertNormalizer(lower_case_nfd_strip_accents=self.lowercase)
        # A token holding whitespace (" ", "## ": tensorflow-text's vocabulary trainer writes them)
        # can never be a piece of BERT's, whose words split at whitespace first; FastWordpiece's
        # own split would still emit "## " inside words. Such a token keeps its id under a name
        # that cannot match ("[" splits off as punctuation).
        matchable = [f"[whitespace-token-{i}]" if any(c.isspace() for c in t) else t for i, t in enumerate(tokens)]
        try:
            self.wordpiece = tf_text.FastWordpieceTokenizer(
                matchable,
                suffix_indicator="##",
                unknown_token="[UNK]",
                no_pretokenization=False,
                token_out_type=tf.int32,
                support_detokenization=False,
            )
        except RuntimeError as error:  # its trie refuses a vocabulary of special tokens only
            where = vocabulary if isinstance(vocabulary, str) else "the vocabulary"
            raise ValueError(
                f"{where}: no WordPiece tokenizer can be built from its {len(tokens)} tokens ({error}); a vocab.txt "
                "holds the special tokens and the word pieces, one a line."
            ) from None
        # A word's first piece is the only one without the "##" prefix.
        self._continues_word = tf.constant([t.startswith("##") for t in tokens])
        self.cls_id, self.sep_id, self.pad_id = (tokens.index(t) for t in ("[CLS]", "[SEP]", "[PAD]"))
        self.layout = bert_layout(self.cls_id, self.sep_id, self.pad_id)

    def tokenize_with_offsets(self, texts):
        """Ragged `[batch, pieces]`: ids, start and end byte offsets into the original `texts`,
        and whether each piece starts and ends its word (a word or a punctuation mark)."""
        if self.normalization == "tokenizers":
            return self._word_offsets(texts)
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
        if self.normalization == "tokenizers":
            return self.wordpiece.tokenize(bert_normalized(texts, self.lowercase))
        return self.wordpiece.tokenize(self.normalizer.normalize(texts))

    def _word_offsets(self, texts):
        """`tokenize_with_offsets` under the tokenizers library's normalizer, which gives no offset
        map: each whitespace-delimited word is normalized and split alone; where normalizing kept
        its length (ASCII text) the pieces keep their own offsets, else each spans the word."""
        words, word_starts, word_ends = tf_text.regex_split_with_offsets(texts, r"[\t\n\r\p{Zs}]+")
        normalized = bert_normalized(words.flat_values, self.lowercase)  # [words]
        ids, starts, ends = self.wordpiece.tokenize_with_offsets(normalized)  # [words, (pieces)]
        kept = tf.equal(tf.strings.length(normalized), tf.strings.length(words.flat_values))  # [words]
        lengths = ids.row_lengths()
        spread = lambda x: tf.repeat(x, lengths)  # noqa: E731  per word -> per piece
        word_start, word_end = spread(word_starts.flat_values), spread(word_ends.flat_values)
        kept_piece = spread(kept)
        piece_starts = tf.where(kept_piece, word_start + starts.flat_values, word_start)
        piece_ends = tf.where(kept_piece, word_start + ends.flat_values, word_end)
        starts_word = tf.logical_not(tf.gather(self._continues_word, ids.flat_values))
        next_starts = tf.concat([starts_word[1:], tf.ones_like(starts_word[:1])], axis=0)
        per_text = lambda values: tf.RaggedTensor.from_row_splits(  # noqa: E731
            values, tf.gather(ids.row_splits, words.row_splits)
        )
        return tuple(per_text(x) for x in (ids.flat_values, piece_starts, piece_ends, starts_word, next_starts))

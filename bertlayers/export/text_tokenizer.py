"""WordPiece tokenization and BERT packing as graph ops that TF Serving links.

Only core TensorFlow ops and tensorflow-text ops present in TF Serving's bundled tf-text
(FastBertNormalize, FastWordpieceTokenizeWithOffsets): no RoundRobinTrim, which servers
before 2.20 lack. Ids equal keras-hub's WordPieceTokenizer's (tests/test_tokenizer.py).
"""

import tensorflow as tf
import tensorflow_text as tf_text

from bertlayers.data.padding import padded_length
from bertlayers.data.tokenizer import load_vocabulary


class InGraphTokenizer(tf.Module):
    """Strings → WordPiece ids (and byte offsets into the original strings), inside a graph.

    One kernel splits words and pieces: FastWordpiece's own pre-tokenization is BERT's basic
    tokenizer (whitespace, every punctuation character, every CJK ideograph on its own), and one
    kernel costs a served request far less than a regex split followed by a ragged WordPiece.

    Args:
      vocabulary: a vocab.txt path or a list of tokens.
      lowercase: lower-case and strip accents first (uncased models).
    """

    def __init__(self, vocabulary, lowercase=True):
        super().__init__()
        tokens = load_vocabulary(vocabulary) if isinstance(vocabulary, str) else list(vocabulary)
        self.vocabulary = tokens
        self.lowercase = bool(lowercase)
        self.normalizer = tf_text.FastBertNormalizer(lower_case_nfd_strip_accents=self.lowercase)
        self.wordpiece = tf_text.FastWordpieceTokenizer(
            tokens, suffix_indicator="##", unknown_token="[UNK]", no_pretokenization=False,
            token_out_type=tf.int32, support_detokenization=False,
        )
        # A word's first piece is the only one without the "##" prefix.
        self._continues_word = tf.constant([t.startswith("##") for t in tokens])
        self.cls_id, self.sep_id, self.pad_id = (tokens.index(t) for t in ("[CLS]", "[SEP]", "[PAD]"))

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


def _pieces_at(segment, index):
    """`segment[row, index[row, column]]` from a ragged `[batch, pieces]`; 0 where the index
    is outside its row."""
    values = tf.concat([segment.values, tf.zeros([1], segment.dtype)], axis=0)  # [pieces + 1]
    starts = tf.cast(segment.row_starts(), tf.int32)[:, tf.newaxis]  # [batch, 1]
    lengths = tf.cast(segment.row_lengths(), tf.int32)[:, tf.newaxis]  # [batch, 1]
    inside = (index >= 0) & (index < lengths)
    return tf.gather(values, tf.where(inside, starts + index, tf.size(segment.values)))


def pack(first, second, sequence_length, cls_id, sep_id, truncate):
    """`[CLS] A [SEP] (B [SEP])` from ragged id segments, padded to the batch's longest row (at
    most `sequence_length`): real requests are short, and padding them all to the exported
    length multiplies the work.

    Waterfall truncation (A keeps up to the budget, B gets what is left) when `truncate`;
    otherwise an over-long request fails with a message naming the limit. Dense index
    arithmetic (each output column picks its piece) rather than ragged concatenation, whose
    shape checks and branches every batch-1 request paid for (tests/test_tokenizer.py counts
    the graph's nodes).

    Returns:
      token_ids, segment_ids, padding_mask: int32 `[batch, length]`, length ≤ `sequence_length`.
    """
    special = 2 if second is None else 3
    budget = sequence_length - special
    length_a = tf.cast(first.row_lengths(), tf.int32)  # [batch]
    length_b = tf.zeros_like(length_a) if second is None else tf.cast(second.row_lengths(), tf.int32)
    checks = []
    if not truncate:
        checks.append(
            tf.debugging.assert_less_equal(
                length_a + length_b,
                budget,
                message=f"The request has more tokens than the exported sequence_length {sequence_length} "
                f"allows ({budget} besides [CLS]/[SEP]); shorten it, or export with truncation on.",
            )
        )
    with tf.control_dependencies(checks):
        keep_a = tf.minimum(length_a, budget)
    keep_b = tf.minimum(length_b, budget - keep_a)
    sep_a = (keep_a + 1)[:, tf.newaxis]  # [batch, 1]: the column of A's [SEP]
    sep_b = sep_a + keep_b[:, tf.newaxis] + 1  # [batch, 1]: B's [SEP], if there is a B
    total = sep_a + 1 if second is None else sep_b + 1  # [batch, 1]
    longest = tf.reduce_max(tf.pad(total[:, 0], [[0, 1]]))  # 0 for an empty batch
    length = padded_length(longest, sequence_length)
    column = tf.range(length)[tf.newaxis, :]  # [1, length]

    token_ids = tf.where(column == 0, cls_id, _pieces_at(first, column - 1))  # [batch, length]
    token_ids = tf.where(column == sep_a, sep_id, token_ids)
    segment_ids = tf.zeros_like(token_ids)
    if second is not None:
        in_b = (column > sep_a) & (column < sep_b)
        token_ids = tf.where(in_b, _pieces_at(second, column - sep_a - 1), token_ids)
        token_ids = tf.where(column == sep_b, sep_id, token_ids)
        segment_ids = tf.cast((column > sep_a) & (column <= sep_b), tf.int32)
    padding_mask = tf.cast(column < total, tf.int32)
    return token_ids * padding_mask, segment_ids * padding_mask, padding_mask

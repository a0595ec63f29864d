"""WordPiece tokenization and BERT packing as graph ops that TF Serving links.

Only core TensorFlow ops and tensorflow-text ops present in TF Serving's bundled tf-text
(FastBertNormalize, RegexSplitWithOffsets, FastWordpieceTokenizeWithOffsets): no
RoundRobinTrim, which servers before 2.20 lack. Ids equal keras-hub's WordPieceTokenizer's.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from bertlayers.data.tokenizer import load_vocabulary

# BERT's basic tokenizer: whitespace separates, every punctuation character is a token.
_PUNCTUATION = r"[\p{P}!-/:-@\[-`{-~]"
_SPLIT = r"\s+|" + _PUNCTUATION


class InGraphTokenizer(tf.Module):
    """Strings → WordPiece ids (and byte offsets into the original strings), inside a graph.

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
            tokens, suffix_indicator="##", unknown_token="[UNK]", no_pretokenization=True,
            token_out_type=tf.int32, support_detokenization=False,
        )
        self.cls_id, self.sep_id, self.pad_id = (tokens.index(t) for t in ("[CLS]", "[SEP]", "[PAD]"))

    def tokenize_with_offsets(self, texts):
        """Ragged `[batch, pieces]`: ids, start and end byte offsets into the original `texts`,
        and whether each piece starts and ends its word (a word or a punctuation mark)."""
        normalized, origin = self.normalizer.normalize_with_offsets(texts)
        words, word_starts, word_ends = tf_text.regex_split_with_offsets(normalized, _SPLIT, _PUNCTUATION)
        ids, piece_starts, piece_ends = self.wordpiece.tokenize_with_offsets(words)
        starts_word = tf.equal(piece_starts, 0)
        ends_word = tf.equal(piece_ends, tf.expand_dims(word_ends - word_starts, -1))
        starts = tf.expand_dims(word_starts, -1) + piece_starts
        ends = tf.expand_dims(word_starts, -1) + piece_ends
        ids, starts, ends, starts_word, ends_word = (
            t.merge_dims(1, 2) for t in (ids, starts, ends, starts_word, ends_word)
        )
        # Normalized byte i came from original byte origin[i].
        original_starts = tf.gather(origin, starts, batch_dims=1)
        original_ends = tf.gather(origin, ends, batch_dims=1)
        return ids, original_starts, original_ends, starts_word, ends_word

    def tokenize(self, texts):
        return self.tokenize_with_offsets(texts)[0]


# Training and offline prediction pad batches to multiples of this: few distinct shapes, so
# few traced graphs. A served graph takes any length, and there the exact longest is faster.
PAD_MULTIPLE = 8


def padded_length(longest, sequence_length, multiple=PAD_MULTIPLE):
    """The length a batch is padded to: its `longest` row rounded up to a multiple of
    `multiple`, at most `sequence_length` (a scalar tensor)."""
    rounded = (longest + multiple - 1) // multiple * multiple
    return tf.minimum(tf.maximum(rounded, multiple), sequence_length)


def pack(first, second, sequence_length, cls_id, sep_id, truncate):
    """`[CLS] A [SEP] (B [SEP])` from ragged id segments, padded to the batch's longest row (at
    most `sequence_length`): real requests are short, and padding them all to the exported
    length multiplies the work.

    Waterfall truncation (A keeps up to the budget, B gets what is left) when `truncate`;
    otherwise an over-long request fails with a message naming the limit.

    Returns:
      token_ids, segment_ids, padding_mask: int32 `[batch, length]`, length ≤ `sequence_length`.
    """
    special = 2 if second is None else 3
    budget = sequence_length - special
    length_a = first.row_lengths()
    total = length_a if second is None else length_a + second.row_lengths()
    checks = []
    if not truncate:
        checks.append(
            tf.debugging.assert_less_equal(
                total,
                tf.cast(budget, total.dtype),
                message=f"The request has more tokens than the exported sequence_length {sequence_length} "
                f"allows ({budget} besides [CLS]/[SEP]); shorten it, or export with truncation on.",
            )
        )
    with tf.control_dependencies(checks):
        keep_a = tf.minimum(length_a, budget)
    batch = tf.shape(length_a, out_type=tf.int64)[0]
    cls = tf.RaggedTensor.from_tensor(tf.fill([batch, 1], cls_id))
    sep = tf.RaggedTensor.from_tensor(tf.fill([batch, 1], sep_id))
    a = tf.ragged.boolean_mask(first, tf.ragged.range(first.row_lengths()) < tf.expand_dims(keep_a, 1))
    pieces, segments = [cls, a, sep], [0, 0, 0]
    if second is not None:
        keep_b = tf.minimum(second.row_lengths(), budget - keep_a)
        b = tf.ragged.boolean_mask(second, tf.ragged.range(second.row_lengths()) < tf.expand_dims(keep_b, 1))
        pieces += [b, sep]
        segments += [1, 1]
    token_ids = tf.concat(pieces, axis=1)
    segment_ids = tf.concat([tf.ones_like(p) * s for p, s in zip(pieces, segments)], axis=1)
    longest = tf.reduce_max(tf.pad(token_ids.row_lengths(), [[0, 1]]))  # 0 for an empty batch
    # Not rounded up: this graph takes any length, and real snippets were served faster at
    # their exact longest than at multiples of 8 (benchmarks/README.md).
    length = padded_length(tf.cast(longest, tf.int32), sequence_length, multiple=1)
    shape = tf.stack([tf.cast(batch, tf.int32), length])
    token_ids = token_ids.to_tensor(0, shape=shape)
    return (
        token_ids,
        segment_ids.to_tensor(0, shape=shape),
        tf.cast(tf.not_equal(token_ids, 0), tf.int32),
    )

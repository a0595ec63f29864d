"""Where a family puts its special tokens, segment ids and padding around one or two texts,
as one object the data pipeline, the runners and the served graph share.

    BERT, ALBERT, ELECTRA   [CLS] A [SEP] B [SEP]          segments 0…0 1…1   (bert_layout)
    RoBERTa, XLM-R          <s> A </s> </s> B </s>         segments all 0 (one segment row)
    DistilBERT              [CLS] A [SEP] B [SEP]          segments all 0 (no segment embedding)
    XLNet                   A <sep> B <sep> <cls>          segments 0…0 1…1 2, padded on the left

`pack` is graph ops (dense index arithmetic, no op TF Serving lacks), so the same code packs
a training batch eagerly and a request inside a SavedModel.
"""

import dataclasses

from bertlayers.startup import require_tensorflow
from bertlayers.tokenizers.padding import padded_length

tf = require_tensorflow(__name__)

TRUNCATIONS = ("longest_first", "waterfall")


@dataclasses.dataclass(frozen=True)
class InputLayout:
    """One family's packing of token ids.

    Attributes:
      start: ids before the first text (`[CLS]`, `<s>`; none in XLNet).
      between: ids between the two texts of a pair (`[SEP]`; RoBERTa's `</s> </s>`).
      end: ids after the last text (`[SEP]`; XLNet's `<sep> <cls>`).
      pad_id: the id of padding positions.
      second_segment: the segment id of the second text (1; 0 where the model has no segment
        embedding).
      end_segments: segment id of each `end` token; None gives it the last text's.
      pad_left: pad at the start of each row (XLNet, which reads its summary from the last token).
    """

    start: tuple
    between: tuple
    end: tuple
    pad_id: int
    second_segment: int = 1
    end_segments: tuple = None
    pad_left: bool = False

    def __post_init__(self):
        for field in ("start", "between", "end"):
            object.__setattr__(self, field, tuple(int(i) for i in getattr(self, field)))
        if self.end_segments is not None and len(self.end_segments) != len(self.end):
            raise ValueError(f"end_segments {self.end_segments} must give one segment per end token {self.end}.")

    def special_tokens(self, pair):
        """How many special tokens a single text (`pair` False) or a pair gets."""
        return len(self.start) + len(self.end) + (len(self.between) if pair else 0)

    def pack(self, first, second=None, sequence_length=512, truncation="longest_first", truncate=True):
        """Token ids, segment ids and padding mask of ragged id rows `first` (and `second`).

        Args:
          first, second: ragged int32 `[batch, (pieces)]` (a tokenizer's output).
          sequence_length: the longest packed row, special tokens included; rows are padded to
            the batch's longest (a multiple of 8, at most this), not to this.
          truncation: "longest_first" (the longer text is cut first, to no less than half the
            room, as Hugging Face's tokenizers do) or "waterfall" (the first text keeps what fits, the second the rest).
          truncate: False makes an over-long row an error naming the limit instead.

        Returns:
          token_ids, segment_ids, padding_mask: int32 `[batch, length]`.
        """
        if truncation not in TRUNCATIONS:
            raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}.")
        pair = second is not None
        budget = sequence_length - self.special_tokens(pair)
        length_a = tf.cast(first.row_lengths(), tf.int32)  # [batch]
        length_b = tf.cast(second.row_lengths(), tf.int32) if pair else tf.zeros_like(length_a)
        checks = []
        if not truncate:
            checks.append(
                tf.debugging.assert_less_equal(
                    length_a + length_b,
                    budget,
                    message=f"The request has more tokens than the exported sequence_length {sequence_length} allows "
                    f"({budget} besides the special tokens); shorten it, or export with truncation on.",
                )
            )
        with tf.control_dependencies(checks):
            if truncation == "waterfall" or not pair:
                keep_a = tf.minimum(length_a, budget)
            else:  # as Hugging Face's tokenizers: the shorter (the first on a tie) keeps up to half
                half = budget // 2
                keep_a = tf.where(
                    length_a <= length_b,
                    tf.minimum(length_a, half),
                    tf.minimum(length_a, budget - tf.minimum(length_b, half)),
                )
        keep_b = tf.minimum(length_b, budget - keep_a)

        start, between, end = (tf.constant(ids or (0,), tf.int32) for ids in (self.start, self.between, self.end))
        a_from = len(self.start)
        a_to = (a_from + keep_a)[:, tf.newaxis]  # [batch, 1]
        b_from = a_to + (len(self.between) if pair else 0)
        b_to = b_from + keep_b[:, tf.newaxis]
        total = b_to + len(self.end)  # [batch, 1]
        longest = tf.reduce_max(tf.pad(total[:, 0], [[0, 1]]))  # 0 for an empty batch
        length = padded_length(longest, sequence_length)
        column = tf.range(length)[tf.newaxis, :]  # [1, length]

        def constant_at(ids, index):  # ids[index], where 0 <= index < len(ids)
            return tf.gather(ids, tf.clip_by_value(index, 0, tf.size(ids) - 1))

        token_ids = tf.where(column < a_from, constant_at(start, column), _pieces_at(first, column - a_from))
        segment_ids = tf.zeros_like(token_ids)
        last_segment = 0
        if pair:
            token_ids = tf.where((column >= a_to) & (column < b_from), constant_at(between, column - a_to), token_ids)
            in_b = (column >= b_from) & (column < b_to)
            token_ids = tf.where(in_b, _pieces_at(second, column - b_from), token_ids)
            segment_ids = tf.where(in_b, self.second_segment, segment_ids)
            last_segment = self.second_segment
        in_end = (column >= b_to) & (column < total)
        token_ids = tf.where(in_end, constant_at(end, column - b_to), token_ids)
        end_segments = tf.constant(
            [last_segment if s is None else s for s in (self.end_segments or (None,) * len(self.end))] or [0], tf.int32
        )
        segment_ids = tf.where(in_end, constant_at(end_segments, column - b_to), segment_ids)
        real = column < total  # [batch, length]
        token_ids = tf.where(real, token_ids, self.pad_id)
        segment_ids = tf.where(real, segment_ids, 0)
        padding_mask = tf.cast(real, tf.int32)
        if self.pad_left:  # row r moves right by (length - total[r]); padding fills the start
            source = column - (length - total)
            outside = source < 0
            token_ids, segment_ids, padding_mask = (
                tf.where(outside, fill, tf.gather(x, tf.maximum(source, 0), batch_dims=1))
                for x, fill in ((token_ids, self.pad_id), (segment_ids, 0), (padding_mask, 0))
            )
        return token_ids, segment_ids, padding_mask


def _pieces_at(segment, index):
    """`segment[row, index[row, column]]` from a ragged `[batch, pieces]`; 0 where the index
    is outside its row."""
    values = tf.concat([segment.values, tf.zeros([1], segment.dtype)], axis=0)  # [pieces + 1]
    starts = tf.cast(segment.row_starts(), tf.int32)[:, tf.newaxis]  # [batch, 1]
    lengths = tf.cast(segment.row_lengths(), tf.int32)[:, tf.newaxis]  # [batch, 1]
    inside = (index >= 0) & (index < lengths)
    return tf.gather(values, tf.where(inside, starts + index, tf.size(segment.values)))


def bert_layout(cls_id, sep_id, pad_id, segments=True):
    """`[CLS] A [SEP] B [SEP]` (BERT, ALBERT, ELECTRA; DistilBERT with `segments=False`)."""
    return InputLayout((cls_id,), (sep_id,), (sep_id,), pad_id, second_segment=1 if segments else 0)

"""What turns text into a model's inputs, as graph ops: a tokenizer and the input layout its
ids are packed in (`CheckpointTokenizer`), in training and in a served graph alike, and the
packer at a fixed length that the runners' data preparation calls (`CheckpointPacker`)."""

import dataclasses

import numpy as np

from bertlayers.startup import require_tensorflow
from bertlayers.tokenizers.input_layout import InputLayout
from bertlayers.utils.text_files import text_batch

tf = require_tensorflow(__name__)
import tensorflow_text as tf_text  # noqa: E402  (after the check above, which names what is missing)

# What separates words (RE2): Unicode's white space, as Python's str.split() sees it.
WORD_SEPARATOR = r"[\t\n\x0B\f\r\x1C-\x1F\x{85}\p{Z}]+"


@dataclasses.dataclass(frozen=True)
class CheckpointTokenizer:
    """A tokenizer (`tokenize(texts)` → ragged int32 ids, graph ops) and the layout its ids are
    packed in: what turns text into a checkpoint's inputs, in training and in a served graph.

    Attributes:
      tokenizer: an `InGraphTokenizer` (WordPiece), `ByteLevelBPE`, `SentencePiece` or
        `SentencePieceBPE` module.
      layout: the family's `InputLayout`.
      vocabulary_size: how many ids the tokenizer can give (the model's embedding rows).
      kind: "wordpiece", "byte_level_bpe", "sentencepiece" or "sentencepiece_bpe".
      truncation: how a long pair is cut ("longest_first" as transformers; "waterfall" for
        the library's WordPiece vocabularies, as keras-hub's packer cuts).
      unknown_id: the id of a word no piece came out of.
    """

    tokenizer: object
    layout: InputLayout
    vocabulary_size: int
    kind: str
    truncation: str = "longest_first"
    unknown_id: int = 0

    # The tokenizers are graph ops with no Python control flow on tensors: traced as they are, not
    # through autograph, whose conversion of every call beneath took seconds a trace (an export
    # traces the tokenizer once a signature).
    @tf.autograph.experimental.do_not_convert
    def tokenize(self, texts):
        """Ids of a batch of strings `[batch]`, ragged int32 `[batch, (pieces)]` (graph ops)."""
        return self.tokenizer.tokenize(texts)

    @property
    def word_takes_its_space(self) -> bool:
        """Whether a word inside a text is tokenized with the space before it (byte-level BPE's
        "Ġword", Gemma's "▁word"); SentencePiece adds its "▁" itself, WordPiece drops spaces."""
        return self.kind in ("byte_level_bpe", "sentencepiece_bpe")

    @tf.autograph.experimental.do_not_convert
    def tokenize_with_offsets(self, texts):
        """Ragged `[batch, pieces]` (graph ops): ids, start and end byte offsets into `texts`,
        and whether each piece starts and ends its word. WordPiece places each piece; the other
        tokenizers' pieces span their whitespace-delimited word (tokenized as inside a text:
        with the space before it where `word_takes_its_space`, but for a text's first word), so answers cut
        by these offsets are whole words."""
        if self.kind == "wordpiece":
            return self.tokenizer.tokenize_with_offsets(texts)
        words, starts, ends = tf_text.regex_split_with_offsets(texts, WORD_SEPARATOR)  # [batch, (words)]
        flat = words.flat_values
        if self.word_takes_its_space:
            flat = tf.where(starts.flat_values > 0, tf.strings.join([" ", flat]), flat)
        pieces = self.tokenizer.tokenize(flat)  # [words, (pieces)]
        # A word no piece came out of (a lone zero-width character) gets the unknown id.
        lengths = tf.maximum(pieces.row_lengths(), 1)
        padded = tf.pad(pieces.to_tensor(self.unknown_id), [[0, 0], [0, 1]], constant_values=self.unknown_id)
        pieces = tf.RaggedTensor.from_tensor(padded, lengths=lengths)  # [words, (pieces)]
        index = tf.ragged.range(lengths)  # each piece's place in its word
        spread = lambda x: tf.repeat(tf.cast(x.flat_values, tf.int64), lengths)  # noqa: E731  per word -> per piece
        per_text = lambda values: tf.RaggedTensor.from_row_splits(  # noqa: E731
            values, tf.gather(pieces.row_splits, words.row_splits)
        )
        return (
            per_text(pieces.flat_values),
            per_text(spread(starts)),
            per_text(spread(ends)),
            per_text(tf.equal(index.flat_values, 0)),
            per_text(tf.equal(index.flat_values, tf.repeat(lengths - 1, lengths))),
        )

    def packer(self, sequence_length):
        """A `CheckpointPacker`: `(first, second=None)` → model inputs at `sequence_length`."""
        return CheckpointPacker(self, sequence_length)

    def encode(self, first, second=None, sequence_length=512, truncation=None):
        """Model inputs of a text or a batch of texts (and their pair texts), as int32 numpy
        arrays `[batch, sequence_length]`: token_ids, segment_ids, padding_mask."""
        as_batch = lambda texts: tf.constant(text_batch(texts), tf.string)  # noqa: E731
        second_ids = None if second is None else self.tokenizer.tokenize(as_batch(second))
        packed = self.layout.pack(
            self.tokenizer.tokenize(as_batch(first)), second_ids, sequence_length, truncation or self.truncation
        )
        return self.padded(dict(zip(("token_ids", "segment_ids", "padding_mask"), packed)), sequence_length)

    def padded(self, inputs, sequence_length):
        """Packed inputs (cut to their batch's longest row) as int32 numpy arrays of the full
        `sequence_length`, padded on the layout's side: what batches of any length concatenate to."""
        result = {}
        for name, x in inputs.items():
            x = np.asarray(x, "int32")
            room = sequence_length - x.shape[1]
            fill = self.layout.pad_id if name == "token_ids" else 0
            result[name] = np.pad(x, [(0, 0), (room, 0) if self.layout.pad_left else (0, room)], constant_values=fill)
        return result


class CheckpointPacker:
    """Texts → a model's inputs at a fixed `sequence_length` (what the runners' data preparation
    calls; `ModelTokenizer.packer` makes one).

    Call args:
      first: a string or a batch of strings; second: optional pair texts, same batch.

    Returns:
      dict of int32 `[batch, length]` numpy arrays: token_ids, segment_ids, padding_mask.
    """

    def __init__(self, checkpoint_tokenizer, sequence_length):
        self.checkpoint_tokenizer = checkpoint_tokenizer
        self.tokenizer = checkpoint_tokenizer.tokenize
        self.sequence_length = int(sequence_length)

    def special_tokens(self, pair):
        return self.checkpoint_tokenizer.layout.special_tokens(pair)

    def __call__(self, first, second=None):
        return self.checkpoint_tokenizer.encode(first, second, self.sequence_length)


def pack_in_chunks(packer, *columns, chunk=512):
    """`packer(*columns)` (texts, or first and second segments) over many rows, `chunk` rows a call
    (each call is one tokenizer graph run over a list): int32 numpy arrays `[rows, seq]`."""
    parts = [packer(*(c[i : i + chunk] for c in columns)) for i in range(0, len(columns[0]), chunk)]
    return {key: np.concatenate([np.asarray(p[key]) for p in parts]).astype("int32") for key in parts[0]}

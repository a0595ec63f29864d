"""WordPiece tokenization and BERT input packing (tensorflow-text through keras-hub)."""

import dataclasses

import keras
import keras_hub
import numpy as np

from bertlayers.startup import require_tensorflow
from bertlayers.utils.text_files import numbered_lines, text_batch

tf = require_tensorflow(__name__)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def load_vocabulary(path: str) -> list[str]:
    """The tokens of a `vocab.txt` (one per line, the line number minus one its id), checked as a
    whole: every token non-empty, without whitespace inside or at its end (keras-hub's trainer's
    " " and "## " aside), and unique (two lines of one token give one
    of their ids no text at all; tensorflow-text refuses them naming neither), BERT's special tokens
    present."""
    vocabulary, lines = [], {}
    for number, line in numbered_lines(path):
        token = line.rstrip("\r\n")
        # Whitespace at a token's end never matches (WordPiece splits on it) but is harmless: keras-hub's
        # vocabulary trainer writes " " and "## ". Inside a token it is another format's line ("tok\t-3.4").
        if not token or any(character.isspace() for character in token.strip()):
            raise ValueError(
                f"{path}:{number}: the token {token!r} is empty or holds whitespace inside; a WordPiece "
                "vocab.txt has one token per line."
            )
        if token != token.rstrip() and token.strip() not in ("", "##"):
            # The tokenizers library (transformers' fast tokenizer) reads "the " as "the"; its Python
            # BertTokenizer and keras-hub as a token no text matches: training and serving would differ.
            raise ValueError(
                f"{path}:{number}: the token {token!r} ends in whitespace, which tokenizers disagree on "
                f"(read as {token.rstrip()!r}, or as a token no text matches); remove the whitespace."
            )
        if token in lines:
            raise ValueError(
                f"{path}:{number}: the token {token!r} is on line {lines[token]} already; each token "
                "must be listed once (its line gives its id)."
            )
        lines[token] = number
        vocabulary.append(token)
    missing = [token for token in SPECIAL_TOKENS if token not in vocabulary]
    if missing:
        raise ValueError(f"{path} lacks the special tokens {missing}; is it a BERT vocab.txt?")
    return vocabulary


def check_vocabulary_fits(vocabulary, vocabulary_size, source="the vocabulary"):
    """Raise a ValueError unless `vocabulary` (a vocab.txt path or tokens) has exactly the
    model's `vocabulary_size` tokens: another size means it belongs to another model, whose
    ids would read the wrong embedding rows (a same-size foreign vocabulary cannot be told)."""
    tokens = load_vocabulary(vocabulary) if isinstance(vocabulary, str) else list(vocabulary)
    if len(tokens) != vocabulary_size:
        raise ValueError(
            f"{vocabulary if isinstance(vocabulary, str) else source} has {len(tokens)} tokens, but the model's "
            f"token embedding has {vocabulary_size} rows: the vocabulary belongs to another model. "
            f"Use the vocab.txt the model was trained with."
        )
    return tokens


@dataclasses.dataclass(frozen=True)
class ModelVocabulary:
    """The WordPiece vocabulary a model's token ids index, and whether text is lower-cased first:
    what a model records so that its text is tokenized as in training (`bertlayers.convert.record_vocabulary`)."""

    tokens: tuple
    lowercase: bool = True

    @classmethod
    def from_file(cls, path, lowercase=True):
        """The tokens of a `vocab.txt` at `path` (checked for BERT's special tokens)."""
        return cls(tuple(load_vocabulary(path)), bool(lowercase))


def wordpiece_tokenizer(
    vocabulary: str | list[str], lowercase: bool = True, sequence_length: int | None = None
) -> keras.layers.Layer:
    """A `keras_hub.tokenizers.WordPieceTokenizer` (tensorflow-text's fast WordPiece).

    Args:
      vocabulary: a `vocab.txt` path, a list of tokens, or a `ModelVocabulary` (whose own
        lower-casing then applies).
      lowercase: lower-case and strip accents first (uncased models).
      sequence_length: if set, pad/truncate outputs to this length.
    """
    if isinstance(vocabulary, ModelVocabulary):
        vocabulary, lowercase = list(vocabulary.tokens), vocabulary.lowercase
    if hasattr(vocabulary, "model_type"):  # a checkpoint's TokenizerFiles
        raise ValueError(
            f"This {vocabulary.model_type} checkpoint's tokenizer is not WordPiece; this step takes WordPiece "
            "checkpoints (BERT, ELECTRA, DistilBERT) only so far."
        )
    if isinstance(vocabulary, str):
        vocabulary = load_vocabulary(vocabulary)
    return keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=vocabulary,
        lowercase=lowercase,
        strip_accents=lowercase,
        sequence_length=sequence_length,
        oov_token="[UNK]",
    )


class BertInputPacker:
    """Tokenize one or two texts and pack `[CLS] A [SEP] (B [SEP])` into encoder inputs.

    Truncation is "waterfall" (B is cut before A): unlike round-robin it adds no
    tensorflow-text op that older TF Serving builds lack.

    Args:
      tokenizer: a WordPiece tokenizer (see `wordpiece_tokenizer`).
      sequence_length: packed length, special tokens included.

    Call args:
      first: a string or a batch of strings.
      second: optional second segment(s), same batch.

    Returns:
      dict of int32 `[batch, sequence_length]` numpy arrays: token_ids, segment_ids, padding_mask.
    """

    def __init__(self, tokenizer: object, sequence_length: int) -> None:
        self.tokenizer = tokenizer
        self.sequence_length = int(sequence_length)
        self._packer = keras_hub.layers.MultiSegmentPacker(
            sequence_length=self.sequence_length,
            start_value=tokenizer.token_to_id("[CLS]"),
            end_value=tokenizer.token_to_id("[SEP]"),
            pad_value=tokenizer.token_to_id("[PAD]"),
            truncate="waterfall",
        )

    def special_tokens(self, pair):
        """How many special tokens a single text (`pair` False) or a pair gets: [CLS] and [SEP]s."""
        return 3 if pair else 2

    def __call__(self, first, second=None):
        first = tf.constant(text_batch(first))
        segments = [self.tokenizer(first)]
        if second is not None:
            second = tf.constant(text_batch(second, "second text"))
            segments.append(self.tokenizer(second))
        token_ids, segment_ids = self._packer(tuple(segments))
        token_ids = np.asarray(token_ids, dtype="int32")
        return {
            "token_ids": token_ids,
            "segment_ids": np.asarray(segment_ids, dtype="int32"),
            "padding_mask": (token_ids != self.tokenizer.token_to_id("[PAD]")).astype("int32"),
        }

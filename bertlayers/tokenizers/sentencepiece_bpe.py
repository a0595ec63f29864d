"""SentencePiece-style BPE with byte fallback (Gemma's tokenizer.json) as graph ops: the ids of
the tokenizers library's BPE over characters, equal to Hugging Face's fast tokenizers
(tests/test_tokenizer_json.py).

    text ─ " " → "▁" ─▶ characters, each outside the vocabulary as its UTF-8 bytes' <0xNN>
         ─ merges, lowest rank first ─▶ pieces ─ vocabulary ─▶ ids

The tokenizers library merges over the whole text (Gemma's pre-tokenizer splits at spaces, and the
normalizer has left none). Where no token of the vocabulary holds a "▁" after another character, no
merge crosses the start of a "▁"-run, so the text is cut there and each distinct word merged once:
the same pieces at a fraction of the work. Otherwise the whole text is merged as one word.
"""

import re

from bertlayers.startup import require_tensorflow
from bertlayers.tokenizers.byte_level_bpe import PairMerges, ragged_rows_where

tf = require_tensorflow(__name__)
import tensorflow_text as tf_text  # noqa: E402  (after the check above, which names what is missing)

# SentencePiece's word-start mark, which stands for a space.
WORD_START = "\u2581"
# The byte-fallback tokens, one a byte value.
BYTE_TOKENS = tuple(f"<0x{value:02X}>" for value in range(256))
# A run of word-start marks and what follows up to the next one, or a run that ends the text.
_WORD = f"{WORD_START}*[^{WORD_START}]+|{WORD_START}+"


def merges_stay_in_words(vocabulary) -> bool:
    """Whether no token of `vocabulary` holds a word-start mark after another character: then no
    merge joins a piece to a "▁" after it, and a text's "▁"-led words merge independently."""
    after = re.compile(f"[^{WORD_START}]{WORD_START}")
    return not any(after.search(token) for token in vocabulary)


class SentencePieceBPE(PairMerges):
    """A tokenizer.json's BPE model over characters with byte fallback (Gemma's): spaces become
    "▁", a character outside the vocabulary becomes its UTF-8 bytes' `<0xNN>` tokens, then the
    merges run.

    Args:
      vocabulary: token -> id dict, holding every `<0xNN>` byte token.
      merges: (left, right) pairs, highest priority first.
      unknown_token: the id a piece outside the vocabulary gets (none does: every byte has its token).
    """

    def __init__(self, vocabulary, merges, unknown_token="<unk>"):
        missing = [token for token in BYTE_TOKENS if token not in vocabulary]
        if missing:
            raise ValueError(
                f"A byte-fallback BPE vocabulary holds the 256 byte tokens <0x00> .. <0xFF>; {len(missing)} are "
                f"missing ({', '.join(missing[:3])}, ...)."
            )
        super().__init__(vocabulary, merges, unknown_token)
        self.splits_words = merges_stay_in_words(self.vocabulary)
        self._byte_tokens = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant([bytes([value]) for value in range(256)]), tf.constant(BYTE_TOKENS)
            ),
            default_value="",
        )

    def _first_symbols(self, words):
        """Each of `words` (`[words]` strings) as its characters, those outside the vocabulary as
        their bytes' tokens: ragged `[words, (symbols)]`."""
        characters = tf.strings.unicode_split(words, "UTF-8")  # [words, (characters)]
        flat = characters.flat_values
        as_bytes = self._byte_tokens.lookup(tf.strings.bytes_split(flat))  # [characters, (bytes)]
        own = tf.RaggedTensor.from_tensor(flat[:, tf.newaxis])
        symbols = ragged_rows_where(self._ids.lookup(flat) >= 0, own, as_bytes)  # [characters, (symbols)]
        return tf.RaggedTensor.from_row_splits(symbols, characters.row_splits).merge_dims(1, 2)

    def tokenize(self, texts):
        """Ids of a batch of strings `[batch]`, ragged int32 `[batch, (pieces)]`."""
        texts = tf.strings.regex_replace(tf.convert_to_tensor(texts, tf.string), " ", WORD_START)
        if self.splits_words:
            words = tf_text.regex_split(texts, _WORD, _WORD)  # [batch, (words)]
        else:
            words = tf.ragged.boolean_mask(tf.RaggedTensor.from_tensor(texts[:, tf.newaxis]), (texts != "")[:, None])
        # Text repeats its words: merge each distinct word once.
        distinct, index = tf.unique(words.flat_values)  # [distinct], [words]
        return self._word_ids(self._first_symbols(distinct), index, words)

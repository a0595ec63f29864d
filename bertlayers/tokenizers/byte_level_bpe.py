"""Byte-level BPE (GPT-2, RoBERTa) as graph ops: the same ids in the Python data path and in
a served SavedModel, equal to Hugging Face's fast tokenizers (tests/test_subword_tokenizers.py).

    text ─ GPT-2 pre-tokenization ─▶ words ─ bytes as printable characters ─▶ characters
         ─ merges, lowest rank first ─▶ pieces ─ vocab.json ─▶ ids

Only core TensorFlow ops and tensorflow-text's RegexSplitWithOffsets, which every TF Serving
since 2.12 links.
"""

import json

from bertlayers.startup import require_tensorflow
from bertlayers.utils.text_files import numbered_lines, read_text

tf = require_tensorflow(__name__)
import tensorflow_text as tf_text  # noqa: E402  (after the check above, which names what is missing)

from bertlayers.utils.saved_module import SavedModule  # noqa: E402  (after the check, as above)

# Oniguruma's (Hugging Face tokenizers') \s in Unicode mode; RE2's \s is ASCII-only.
WHITESPACE = r"\t\n\x0B\f\r\x{85}\p{Z}"
# GPT-2's pattern without its one lookahead, `\s+(?!\S)` (RE2 has no lookahead): the
# whitespace runs it decides are split beforehand (`_gpt2_words`).
_WORD = rf"'s|'t|'re|'ve|'m|'ll|'d| ?\p{{L}}+| ?\p{{N}}+| ?[^{WHITESPACE}\p{{L}}\p{{N}}]+|[{WHITESPACE}]+"
# A whitespace run and the characters up to the next whitespace, or a run that ends the text.
_CHUNK = rf"[{WHITESPACE}]*[^{WHITESPACE}]+|[{WHITESPACE}]+"
# Llama-3's pattern (EuroBERT's tokenizer.json) without its lookahead `\s+(?!\S)`, \s as Oniguruma's;
# Qwen2's (Qwen3's tokenizer.json) is the same but for its digits, one a word where Llama-3 takes three.
_LLAMA3_WORD = (
    rf"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{{L}}\p{{N}}]?\p{{L}}+|\p{{N}}{{1,3}}"
    rf"| ?[^{WHITESPACE}\p{{L}}\p{{N}}]+[\r\n]*|[{WHITESPACE}]*[\r\n]+|[{WHITESPACE}]+"
)
_SPLIT_WORDS = {"llama3": _LLAMA3_WORD, "qwen2": _LLAMA3_WORD.replace(r"\p{N}{1,3}", r"\p{N}", 1)}
# Whitespace that is not a line break.
_BLANK = r"\t\x0B\f\x{85}\p{Z}"
# Where `PairMerges` cuts its groups of words by length, in symbols (the last group unbounded).
MERGE_WIDTHS = (-1, 16)
# The pre-tokenizations a tokenizer.json may name, by the regex it gives (see `tokenizer_json`).
PRE_TOKENIZERS = ("gpt2", "llama3", "qwen2")


def bytes_to_unicode():
    """GPT-2's map from the 256 byte values to printable characters (its vocab.json's alphabet):
    printable Latin-1 bytes stand for themselves, the others for code points from 256 up."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = iter(range(256, 512))
    return {byte: chr(byte if byte in printable else next(shifted)) for byte in range(256)}


def read_bpe_files(vocab_json, merges_txt):
    """(token -> id dict, [(left, right)] merges in rank order) of GPT-2 style files, each
    checked as a whole: the vocabulary a JSON object of distinct tokens to the ids 0 .. n - 1, each
    id once; the merges non-empty (without them every word splits into bytes), each line two
    symbols of the vocabulary whose join is in it too. A ValueError names the file, line and value."""
    try:
        vocabulary = json.loads(read_text(vocab_json))
    except json.JSONDecodeError as error:
        raise ValueError(f"{vocab_json} is not a JSON vocabulary: {error}") from None
    if not isinstance(vocabulary, dict) or not all(type(i) is int for i in vocabulary.values()):
        raise ValueError(f"{vocab_json} is not a byte-level BPE vocabulary (expected a JSON object of token -> id).")
    by_id = {}
    for token, index in vocabulary.items():
        if index in by_id:
            raise ValueError(
                f"{vocab_json}: the tokens {by_id[index]!r} and {token!r} both have id {index}; each id "
                "names one token."
            )
        by_id[index] = token
    gaps = sorted(set(range(len(by_id))) - set(by_id))
    if gaps:
        raise ValueError(
            f"{vocab_json}: ids run from {min(by_id)} to {max(by_id)} for {len(by_id)} tokens (no token has "
            f"id {gaps[0]}); a vocabulary's ids are 0 .. size - 1, each once."
        )
    merges = []
    for number, line in numbered_lines(merges_txt):
        line = line.rstrip("\r\n")
        if not line or (number == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not all(parts):
            raise ValueError(
                f"{merges_txt}:{number}: expected a merge 'left right', got {line!r}; is it a BPE merges.txt?"
            )
        unknown = [part for part in parts if part not in vocabulary]
        if unknown:
            raise ValueError(
                f"{merges_txt}:{number}: the merge {line!r} joins {unknown[0]!r}, which {vocab_json} lacks: "
                "the files do not belong together."
            )
        merges.append(tuple(parts))
    if not merges:
        raise ValueError(
            f"{merges_txt} holds no merges: every word would be split into single bytes. Is it the "
            "checkpoint's merges.txt?"
        )
    missing = [f"{a}{b}" for a, b in merges if f"{a}{b}" not in vocabulary][:5]
    if missing:
        raise ValueError(
            f"{merges_txt} merges into pieces {vocab_json} lacks ({', '.join(map(repr, missing))}): the files do not belong together."
        )
    return vocabulary, merges


def _gpt2_words(texts):
    """GPT-2's pre-tokenization, ragged `[batch, (words)]` strings.

    Its `\\s+(?!\\S)` gives a whitespace run before a word all but its last character, which
    starts the word (a space joins it, " word"; another whitespace is a word of its own). So
    each chunk (a run and the characters after it) is cut before its last whitespace
    character, and the tail is split with the lookahead-free pattern.
    """
    chunks = tf_text.regex_split(texts, _CHUNK, _CHUNK)  # [batch, (chunks)]
    flat = chunks.flat_values
    only_space = tf.strings.regex_full_match(flat, rf"[{WHITESPACE}]+")
    head = tf.strings.regex_replace(flat, rf"^([{WHITESPACE}]*?)[{WHITESPACE}]?[^{WHITESPACE}]+$", r"\1")
    tail = tf.where(
        only_space, "", tf.strings.regex_replace(flat, rf"^[{WHITESPACE}]*?([{WHITESPACE}]?[^{WHITESPACE}]+)$", r"\1")
    )
    parts = tf.reshape(tf.stack([head, tail], axis=1), [-1])  # head, tail of each chunk in order
    parts = tf.RaggedTensor.from_row_splits(parts, chunks.row_splits * 2)
    parts = tf.ragged.boolean_mask(parts, parts != "")  # [batch, (parts)]
    words = tf_text.regex_split(parts, _WORD, _WORD)  # [batch, (parts), (words)]
    return words.merge_dims(1, 2)


def _split_words(texts, pattern):
    """Llama-3's pre-tokenization (its `Split` regex, "Isolated"), ragged `[batch, (words)]` strings
    (or Qwen2's: `pattern` is the lookahead-free regex of either, `_SPLIT_WORDS`).

    Its `\\s+(?!\\S)` matters only in a run of two or more whitespace characters before
    non-whitespace whose last character is no line break: the run's last character then starts
    what follows (" word", " (", or itself). No match of the pattern crosses that point, so the
    text is cut there and the lookahead-free pattern runs on each piece: the same words. (Unlike
    GPT-2's, this pattern lets punctuation take the line breaks after it, so the pieces between
    cuts are matched whole, not per whitespace-delimited chunk.)
    """
    chunks = tf_text.regex_split(texts, _CHUNK, _CHUNK)  # [batch, (chunks)]
    flat = chunks.flat_values
    whole = rf"^([{WHITESPACE}]+)([{_BLANK}][^{WHITESPACE}]+)$"
    cut = tf.strings.regex_full_match(flat, whole)
    head = tf.where(cut, tf.strings.regex_replace(flat, whole, r"\1"), flat)
    tail = tf.where(cut, tf.strings.regex_replace(flat, whole, r"\2"), "")
    parts = tf.RaggedTensor.from_row_splits(tf.reshape(tf.stack([head, tail], axis=1), [-1]), chunks.row_splits * 2)
    starts = tf.reshape(tf.stack([tf.zeros_like(cut), cut], axis=1), [-1])  # a tail starts a piece
    index = tf.range(tf.size(starts, out_type=tf.int64))
    starts = tf.logical_or(
        starts, tf.equal(index, tf.gather(parts.row_starts(), parts.value_rowids()))
    )  # a text's first
    keep = parts.flat_values != ""
    values, starts, rows = (tf.boolean_mask(x, keep) for x in (parts.flat_values, starts, parts.value_rowids()))
    piece_index = tf.cumsum(tf.cast(starts, tf.int32)) - 1  # [parts]
    pieces = tf.strings.unsorted_segment_join(values, piece_index, tf.reduce_sum(tf.cast(starts, tf.int32)))
    pieces = tf.RaggedTensor.from_value_rowids(
        pieces, tf.boolean_mask(rows, starts), nrows=parts.nrows()
    )  # [batch, (pieces)]
    words = tf_text.regex_split(pieces, pattern, pattern)  # [batch, (pieces), (words)]
    return words.merge_dims(1, 2)


def ragged_rows_where(condition, if_true, if_false):
    """Row i of `if_true` where `condition[i]`, else row i of `if_false` (each ragged `[n, (k)]`)."""
    keep = if_true.with_flat_values(tf.gather(condition, if_true.value_rowids()))
    other = if_false.with_flat_values(tf.gather(tf.logical_not(condition), if_false.value_rowids()))
    return tf.concat([tf.ragged.boolean_mask(if_true, keep), tf.ragged.boolean_mask(if_false, other)], axis=1)


class PairMerges(SavedModule):
    """What every BPE model of a tokenizer.json shares: its vocabulary and merges as lookup
    tables, and the merging of each word's symbols, lowest rank first (`ByteLevelBPE`,
    `SentencePieceBPE`: they differ in what a word and its first symbols are).

    Args:
      vocabulary: token -> id dict.
      merges: (left, right) pairs, highest priority first.
      unknown_token: the id a piece outside the vocabulary gets.
    """

    def __init__(self, vocabulary, merges, unknown_token="<unk>"):
        super().__init__()
        self.vocabulary = dict(vocabulary)
        self.unknown_id = self.vocabulary.get(unknown_token, 0)
        self._no_merge = len(merges)
        self._ranks = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant([f"{a} {b}" for a, b in merges] or [" "]),
                tf.constant(list(range(len(merges))) or [self._no_merge], tf.int32),
            ),
            default_value=self._no_merge,
        )
        self._ids = tf.lookup.StaticHashTable(  # -1 for a piece outside the vocabulary
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(self.vocabulary)), tf.constant(list(self.vocabulary.values()), tf.int32)
            ),
            default_value=-1,
        )

    @property
    def vocabulary_size(self):
        return len(self.vocabulary)

    def token_to_id(self, token):
        return self.vocabulary[token]

    def _merge_dense(self, symbols):
        """BPE on each row of `symbols` (`[words, length]` strings, "" after a word's end): merge
        the adjacent pair of lowest rank (the leftmost of equal ones) until no pair merges.

        A step works on the rows still merging only: a row that no pair merges is done and leaves
        the working set, so the long words' many steps do not drag every short word along."""

        def step(active, rows, done):
            left, right = active[:, :-1], active[:, 1:]
            ranks = self._ranks.lookup(tf.strings.join([left, right], separator=" "))
            ranks = tf.where(right == "", self._no_merge, ranks)  # [active, length - 1]
            # One more column, never a merge: a one-symbol word has a row to take the minimum of.
            ranks = tf.pad(ranks, [[0, 0], [0, 1]], constant_values=self._no_merge)  # [active, length]
            best = tf.argmin(ranks, axis=1, output_type=tf.int32)
            merges = tf.reduce_min(ranks, axis=1) < self._no_merge
            column = tf.range(tf.shape(active)[1])[tf.newaxis, :]  # [1, length]
            at = best[:, tf.newaxis]  # [active, 1]
            joined = tf.strings.join([active, tf.roll(active, -1, axis=1)])
            merged = tf.where(column == at, joined, active)
            # Everything after the merged pair moves one column left; "" fills the end.
            source = tf.where(column > at, column + 1, column)
            merged = tf.gather(tf.pad(merged, [[0, 0], [0, 1]]), source, batch_dims=1)
            finished = tf.logical_not(merges)
            done = tf.tensor_scatter_nd_update(
                done, tf.boolean_mask(rows, finished)[:, tf.newaxis], tf.boolean_mask(active, finished)
            )
            return tf.boolean_mask(merged, merges), tf.boolean_mask(rows, merges), done

        _, _, done = tf.while_loop(
            lambda active, _, __: tf.shape(active)[0] > 0,
            step,
            (symbols, tf.range(tf.shape(symbols)[0]), symbols),
            shape_invariants=(tf.TensorShape([None, None]), tf.TensorShape([None]), symbols.shape),
        )
        return done

    def _merge(self, symbols):
        """BPE on each row of ragged `symbols` (`[words, (symbols)]` strings): its pieces, ragged
        `[words, (pieces)]`. Words are merged in groups of similar length, each as wide as its
        longest word (one 300-character word would otherwise widen every row to 300)."""
        lengths = symbols.row_lengths()
        groups, rows = [], []
        for low, high in zip(MERGE_WIDTHS, MERGE_WIDTHS[1:] + (None,)):
            member = lengths > low if high is None else (lengths > low) & (lengths <= high)
            index = tf.where(member)[:, 0]
            dense = tf.gather(symbols, index).to_tensor(default_value="")
            groups.append(tf.RaggedTensor.from_tensor(self._merge_dense(dense), padding=""))
            rows.append(index)
        order = tf.argsort(tf.concat(rows, axis=0))  # each word's place among the groups' rows
        return tf.gather(tf.concat(groups, axis=0), order)

    def _word_ids(self, symbols, index, words):
        """Ids `[batch, (pieces)]` of `words` (ragged `[batch, (words)]` strings): `symbols` are
        the first symbols of the distinct words (ragged `[distinct, (symbols)]`), `index` each
        word's distinct one."""
        pieces = self._merge(symbols)  # [distinct, (pieces)]
        found = self._ids.lookup(pieces.flat_values)
        ids = tf.gather(
            pieces.with_flat_values(tf.where(found < 0, self.unknown_id, found)), index
        )  # [words, (pieces)]
        return words.with_flat_values(ids).merge_dims(1, 2)


class ByteLevelBPE(PairMerges):
    """GPT-2 style byte-level BPE tokenizer (RoBERTa's `vocab.json` + `merges.txt`; a
    tokenizer.json's BPE model).

    Args:
      vocabulary: token -> id dict (vocab.json).
      merges: (left, right) pairs, highest priority first (merges.txt).
      unknown_token: the id a piece outside the vocabulary gets (none does with a vocabulary
        built with its merges, which holds every byte).
      pre_tokenizer: "gpt2" (GPT-2's, RoBERTa's and ModernBERT's regex), "llama3" (Llama-3's,
        EuroBERT's) or "qwen2" (Qwen2's and Qwen3's: Llama-3's with single digits).
      ignore_merges: a word that is in the vocabulary whole is that one piece, merges or not
        (the tokenizers library's `ignore_merges`, Llama-3's BPE).
      normalization_form: "NFC", "NFKC", "NFD" or "NFKD" to normalize the text first (a
        tokenizer.json's Unicode normalizer); None: as it is.
    """

    def __init__(
        self,
        vocabulary,
        merges,
        unknown_token="<unk>",
        pre_tokenizer="gpt2",
        ignore_merges=False,
        normalization_form=None,
    ):
        if pre_tokenizer not in PRE_TOKENIZERS:
            raise ValueError(f"pre_tokenizer must be one of {PRE_TOKENIZERS}, got {pre_tokenizer!r}.")
        super().__init__(vocabulary, merges, unknown_token)
        self.pre_tokenizer = pre_tokenizer
        self.ignore_merges = bool(ignore_merges)
        self.normalization_form = normalization_form
        byte_chars = bytes_to_unicode()
        self._byte_chars = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant([bytes([b]) for b in byte_chars]), tf.constant(list(byte_chars.values()))
            ),
            default_value="",
        )

    @classmethod
    def from_files(cls, vocab_json, merges_txt, unknown_token="<unk>"):
        return cls(*read_bpe_files(vocab_json, merges_txt), unknown_token=unknown_token)

    def tokenize(self, texts):
        """Ids of a batch of strings `[batch]`, ragged int32 `[batch, (pieces)]`."""
        texts = tf.convert_to_tensor(texts, tf.string)
        if self.normalization_form is not None:
            texts = tf_text.normalize_utf8(texts, self.normalization_form)
        if self.pre_tokenizer == "gpt2":
            words = _gpt2_words(texts)  # [batch, (words)]
        else:
            words = _split_words(texts, _SPLIT_WORDS[self.pre_tokenizer])
        # Text repeats its words: merge each distinct word once.
        distinct, index = tf.unique(words.flat_values)  # [distinct], [words]
        characters = self._byte_chars.lookup(tf.strings.bytes_split(distinct))  # [distinct, (bytes)]
        if self.ignore_merges:  # a word in the vocabulary is its own piece: nothing to merge
            whole = tf.strings.reduce_join(characters, axis=1)  # [distinct]
            alone = tf.RaggedTensor.from_tensor(whole[:, tf.newaxis])
            characters = ragged_rows_where(self._ids.lookup(whole) >= 0, alone, characters)
        return self._word_ids(characters, index, words)

"""The biLM's data: sentences of words (case kept), characters for any word, a word vocabulary
for the softmax, learned from the corpus.

    corpus → sentences → words (letters and digits, apostrophes and hyphens inside; each other
    character its own word) → <S> w_1 .. w_n </S>, cut to `sequence_length` words
    softmax vocabulary: <pad>, <S>, </S>, <UNK>, then the corpus's most frequent words
    (words.txt beside the run); a word outside it is <UNK> as a target, and still its own
    characters as an input.

Batches: `character_ids` `[B, S, 50]`, `padding_mask` `[B, S]`, `word_ids` `[B, S]`, S the
batch's longest sentence. The order is a fixed permutation per pass over the sentences, keyed by
the seed: a resumed run skips to the batch it stopped at and draws what an uninterrupted run would.
"""

import collections
import dataclasses
import logging
import os
import re

import numpy as np

from bertlayers.families.elmo.characters import MAX_CHARACTERS, SENTENCE_END, SENTENCE_START, character_ids
from bertlayers.startup import require_tensorflow
from bertlayers.utils.atomic_files import write_text

tf = require_tensorflow(__name__)
logger = logging.getLogger(__name__)

PAD, UNK = "<pad>", "<UNK>"
SPECIAL_WORDS = (PAD, SENTENCE_START, SENTENCE_END, UNK)
DEFAULT_VOCABULARY_SIZE = 10_000
_WORD = re.compile(r"\w+(?:['’-]\w+)*|[^\w\s]")


def bilm_words(sentence: str) -> list:
    """`sentence`'s words as the biLM reads them, case kept: `tasks.words_of`'s rule (letters and
    digits, each other character alone) except that apostrophes and hyphens inside a word keep it
    whole ("Rowling's", "state-of-the-art"), so that a word's characters reach the character CNN."""
    return _WORD.findall(sentence)


@dataclasses.dataclass(frozen=True)
class WordVocabulary:
    """The softmax's words by id (`SPECIAL_WORDS` first)."""

    tokens: tuple

    @property
    def size(self) -> int:
        """How many words the softmax has."""
        return len(self.tokens)

    def model_tokenizer(self, lowercase: bool) -> None:
        """None: a biLM reads words and their characters, which no subword tokenizer gives."""
        return None

    @classmethod
    def from_file(cls, path: str) -> "WordVocabulary":
        """The word list of `path` (a word a line), or a ValueError naming the file when it does not
        start with `SPECIAL_WORDS`."""
        with open(path, encoding="utf-8") as f:
            tokens = tuple(line.rstrip("\n") for line in f if line.rstrip("\n"))
        if tokens[: len(SPECIAL_WORDS)] != SPECIAL_WORDS:
            raise ValueError(f"{path}: a biLM word list starts with {', '.join(SPECIAL_WORDS)}, one a line.")
        return cls(tokens)

    @classmethod
    def from_sentences(cls, sentences: list, size: int) -> "WordVocabulary":
        """The `size` - 4 most frequent words of `sentences` (lists of words) after the special ones;
        ties by first appearance."""
        counts = collections.Counter(word for sentence in sentences for word in sentence)
        return cls(SPECIAL_WORDS + tuple(word for word, _ in counts.most_common(max(0, size - len(SPECIAL_WORDS)))))


def corpus_sentences(documents: list, sequence_length: int) -> list:
    """Word lists of at most `sequence_length` - 2 words: every sentence of `documents`, a long
    one cut into several."""
    room = sequence_length - 2
    sentences = []
    for document in documents:
        for sentence in document:
            words = bilm_words(sentence)
            sentences.extend(words[start : start + room] for start in range(0, len(words), room))
    return sentences


@dataclasses.dataclass
class WordBatches:
    """What `word_batches` makes: the batch stream and what it was made from."""

    dataset: object  # endless dict batches (see the module docstring)
    vocabulary: str  # the words.txt path
    vocab: WordVocabulary
    num_records: int  # sentences


def word_batches(
    documents: list,
    vocabulary: WordVocabulary,
    vocabulary_path: str,
    sequence_length: int,
    batch_size: int,
    num_train_steps: int,
    seed: int,
    skip_batches: int = 0,
) -> WordBatches:
    """The biLM's batches from `documents` (module docstring)."""
    if sequence_length < 3:
        raise ValueError(f"sequence_length must be at least 3 words with <S> and </S>, got {sequence_length}.")
    sentences = corpus_sentences(documents, sequence_length)
    if len(sentences) < batch_size:
        raise ValueError(f"The corpus holds {len(sentences)} sentences, fewer than one batch of {batch_size}.")
    # Every distinct word once: its characters and its softmax id, gathered per batch in the graph.
    words = sorted({w for s in sentences for w in s})
    index = {word: i for i, word in enumerate((PAD, SENTENCE_START, SENTENCE_END, *words))}
    softmax = {word: i for i, word in enumerate(vocabulary.tokens)}
    table = np.zeros((len(index), MAX_CHARACTERS), np.int32)  # row 0: a padding word, all zeros
    for word, i in index.items():
        if i:
            table[i] = character_ids(word)
    targets = np.array([softmax.get(word, softmax[UNK]) for word in index], np.int32)
    targets[0] = 0
    rows = np.zeros((len(sentences), sequence_length), np.int32)
    for row, sentence in enumerate(sentences):
        ids = [index[w] for w in (SENTENCE_START, *sentence, SENTENCE_END)]
        rows[row, : len(ids)] = ids

    passes = num_train_steps * batch_size // len(sentences) + 1
    rng = np.random.default_rng(seed)
    order = np.concatenate([rng.permutation(len(sentences)) for _ in range(passes)]).astype(np.int32)
    rows, table, targets = tf.constant(rows), tf.constant(table), tf.constant(targets)

    def to_inputs(picked):
        ids = tf.gather(rows, picked)  # [B, sequence_length]
        length = tf.reduce_max(tf.reduce_sum(tf.cast(ids > 0, tf.int32), axis=1))
        ids = ids[:, :length]  # [B, S]: the batch's longest sentence
        return {
            "character_ids": tf.gather(table, ids),  # [B, S, 50]
            "padding_mask": tf.cast(ids > 0, tf.int32),
            "word_ids": tf.gather(targets, ids),
        }

    dataset = (
        tf.data.Dataset.from_tensor_slices(order)
        .batch(batch_size, drop_remainder=True)
        .skip(skip_batches)
        .repeat()
        .map(to_inputs, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .prefetch(tf.data.AUTOTUNE)
    )
    logger.info(f"biLM data: {len(sentences)} sentences, {len(words)} distinct words, softmax over {vocabulary.size}")
    return WordBatches(dataset, vocabulary_path, vocabulary, len(sentences))


def pretraining_word_batches(config, work_dir, batch_size, num_train_steps, skip_batches=0) -> WordBatches:
    """`word_batches` for a pretraining run (`DataObjective.inputs`): the corpus of `config`
    (default: the Wikipedia excerpt), its word list (`config.vocabulary` given, else the corpus's
    `config.vocabulary_size` words written to `work_dir/words.txt`)."""
    from bertlayers.pretraining_data.corpus import read_corpus, wikipedia_excerpt_path

    corpus = config.corpus or wikipedia_excerpt_path()
    if config.input_files:
        raise ValueError("The biLM reads a text corpus (--corpus), not TFRecords (--input_files).")
    documents = read_corpus(corpus, config.corpus_format)
    path = config.vocabulary or os.path.join(work_dir, "words.txt")
    if config.vocabulary or os.path.exists(path):
        vocabulary = WordVocabulary.from_file(path)
    else:
        size = config.vocabulary_size or DEFAULT_VOCABULARY_SIZE
        vocabulary = WordVocabulary.from_sentences(corpus_sentences(documents, config.sequence_length), size)
        os.makedirs(work_dir, exist_ok=True)
        write_text(path, "".join(word + "\n" for word in vocabulary.tokens))
    return word_batches(
        documents,
        vocabulary,
        path,
        config.sequence_length,
        batch_size,
        num_train_steps,
        config.seed,
        skip_batches,
    )

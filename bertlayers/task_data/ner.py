"""Token classification data: CoNLL BIO files, labels aligned to the first piece of each word."""

import warnings

import numpy as np

from bertlayers.startup import require_tensorflow
from bertlayers.utils.atomic_files import write_text
from bertlayers.utils.text_files import numbered_lines

tf = require_tensorflow(__name__)


def read_conll(path):
    """Sentences of a CoNLL file: lists of (word, tag); blank lines separate sentences; the tag is
    the last column. Columns are split at tabs where a line has them, else at spaces; every line
    has the number of columns of the first (a line short of one, its tag column gone, would make
    the column before it a tag). CoNLL-2003's `-DOCSTART-` lines separate documents: they are no
    sentence. A word that holds a space is refused (a line is one word)."""
    sentences, current, columns = [], [], None
    for number, line in numbered_lines(path):
        fields = [f.strip() for f in line.rstrip("\r\n").split("\t")] if "\t" in line else line.split()
        while fields and not fields[-1]:  # a tab at the end of the line
            fields.pop()
        if not any(fields):
            if current:
                sentences.append(current)
                current = []
            continue
        if fields[0] == "-DOCSTART-":
            if current:
                sentences.append(current)
                current = []
            continue
        if len(fields) < 2:
            raise ValueError(f"{path}:{number}: expected a word and a tag, got {line.strip()!r}.")
        if columns is None:
            columns = (number, len(fields))
        elif len(fields) != columns[1]:
            raise ValueError(
                f"{path}:{number}: {len(fields)} columns where line {columns[0]} has {columns[1]} "
                f"({line.strip()!r}): every line is a word, its columns and its tag last."
            )
        if any(not f or f != f.strip() or " " in f for f in fields):
            raise ValueError(f"{path}:{number}: {fields[0]!r}: a column holds a space or is empty; a line is one word.")
        current.append((fields[0], fields[-1]))
    if current:
        sentences.append(current)
    if not sentences:
        raise ValueError(f"{path} holds no sentences.")
    return sentences


def write_conll(path, sentences):
    write_text(path, "".join("".join(f"{word}\t{tag}\n" for word, tag in sentence) + "\n" for sentence in sentences))


def tag_vocabulary(sentences):
    """ "O" first, then the other tags sorted."""
    tags = {tag for sentence in sentences for _, tag in sentence}
    return ["O"] + sorted(tags - {"O"})


def encode_sentences(sentences, tokenizer, sequence_length, tags, source, every_piece=False):
    """Encoder inputs, label ids and weights for `sentences`.

    Each word's label sits on its first piece (weight 1); other pieces, the special tokens and
    padding have weight 0. With `every_piece` (a CRF tagger's chain runs over every real token)
    a word's later pieces are labelled too, continuing its entity ("B-x" → "I-x" where the tag set
    has it), and the special tokens are "O" (which the tag set must then have); the weights still
    mark the first pieces. Words are tokenized one at a time, as their family's tokenizer sees a
    word inside a sentence: byte-level BPE with the space before it (RoBERTa's "Ġword", Gemma's "▁word"),
    SentencePiece with its word-start "▁" (which it adds), WordPiece as it is. Words beyond
    `sequence_length` are cut, with one warning that counts the sentences affected;
    `word_starts` records where each kept word starts (-1 if cut).

    Args:
      tokenizer: a `CheckpointTokenizer` (`ModelTokenizer.in_graph()`).

    Raises:
      ValueError naming the sentence for a tag the model does not know.
    """
    index = {tag: i for i, tag in enumerate(tags)}
    words = [word for sentence in sentences for word, _ in sentence]
    if tokenizer.word_takes_its_space:
        words = [" " + word for word in words]
    pieces = tokenizer.tokenize(tf.constant(words, tf.string)).to_list() if words else []
    layout = tokenizer.layout
    room = sequence_length - layout.special_tokens(pair=False)

    n = len(sentences)
    rows, word_starts, word_lengths, cut, offset = [], [], [], 0, 0
    for row, sentence in enumerate(sentences):
        ids, starts, lengths = [], [], []
        for position, (_, tag) in enumerate(sentence):
            if tag not in index:
                raise ValueError(
                    f"{source}: sentence {row + 1}, word {position + 1}: unknown tag {tag!r}; known: {tags}."
                )
            word_pieces = list(pieces[offset + position]) or [tokenizer.unknown_id]
            if (starts and starts[-1] < 0) or len(ids) + len(word_pieces) > room:
                starts.append(-1)  # this word and every later one no longer fit
                continue
            starts.append(len(ids))
            lengths.append(len(word_pieces))
            ids.extend(word_pieces)
        offset += len(sentence)
        cut += any(s < 0 for s in starts)
        rows.append(ids)
        word_starts.append(starts)
        word_lengths.append(lengths + [0] * (len(starts) - len(lengths)))
    if cut:
        warnings.warn(
            f"{cut} of {n} sentences in {source} do not fit in sequence_length {sequence_length}; "
            f"their last words were cut (and count as predicted 'O').",
            stacklevel=2,
        )
    ragged = tf.RaggedTensor.from_row_lengths(
        tf.constant([i for ids in rows for i in ids], tf.int32), [len(ids) for ids in rows]
    )
    inputs = tokenizer.padded(
        dict(zip(("token_ids", "segment_ids", "padding_mask"), layout.pack(ragged, None, sequence_length))),
        sequence_length,
    )
    # A word's position: after the padding (on the left in XLNet's layout) and the start tokens.
    before = (sequence_length - inputs["padding_mask"].sum(axis=1) if layout.pad_left else np.zeros(n, "int64")) + len(
        layout.start
    )
    word_starts = [[int(before[row]) + s if s >= 0 else -1 for s in starts] for row, starts in enumerate(word_starts)]
    labels = np.zeros((n, sequence_length), "int32")
    weights = np.zeros((n, sequence_length), "float32")
    if every_piece:
        if "O" not in index:
            raise ValueError(f"every_piece labels the special tokens 'O', which the tags {tags} lack.")
        labels[:] = index["O"]
    for row, (sentence, starts, lengths) in enumerate(zip(sentences, word_starts, word_lengths)):
        for (_, tag), start, length in zip(sentence, starts, lengths):
            if start >= 0:
                labels[row, start], weights[row, start] = index[tag], 1.0
                if every_piece and length > 1:
                    inside = "I-" + tag[2:] if tag.startswith("B-") and "I-" + tag[2:] in index else tag
                    labels[row, start + 1 : start + length] = index[inside]
    return inputs, labels, weights, word_starts


def decode_tags(logits, word_starts, tags):
    """Per-word predicted tags from token logits `[n, seq, tags]` (cut words get "O")."""
    return word_tags(np.asarray(logits).argmax(-1), word_starts, tags)


def word_tags(tag_ids, word_starts, tags):
    """Per-word tags from per-token tag ids `[n, seq]` (a CRF's Viterbi path; cut words get "O")."""
    tag_ids = np.asarray(tag_ids)
    return [[tags[tag_ids[row, s]] if s >= 0 else "O" for s in starts] for row, starts in enumerate(word_starts)]

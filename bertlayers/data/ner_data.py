"""Token classification data: CoNLL BIO files, labels aligned to the first WordPiece of each word."""

import warnings

import numpy as np
import tensorflow as tf

from bertlayers.data.text_files import numbered_lines
from bertlayers.utils.atomic_files import write_text


def read_conll(path):
    """Sentences of a CoNLL file: lists of (word, tag); blank lines separate sentences; the tag is
    the last column."""
    sentences, current = [], []
    for number, line in numbered_lines(path):
        fields = line.split()
        if not fields:
            if current:
                sentences.append(current)
                current = []
            continue
        if len(fields) < 2:
            raise ValueError(f"{path}:{number}: expected a word and a tag, got {line.strip()!r}.")
        current.append((fields[0], fields[-1]))
    if current:
        sentences.append(current)
    if not sentences:
        raise ValueError(f"{path} holds no sentences.")
    return sentences


def write_conll(path, sentences):
    write_text(path, "".join("".join(f"{word}\t{tag}\n" for word, tag in sentence) + "\n" for sentence in sentences))


def tag_vocabulary(sentences):
    """"O" first, then the other tags sorted."""
    tags = {tag for sentence in sentences for _, tag in sentence}
    return ["O"] + sorted(tags - {"O"})


def encode_sentences(sentences, tokenizer, sequence_length, tags, source):
    """Encoder inputs, label ids and weights for `sentences`.

    Each word's label sits on its first WordPiece (weight 1); other pieces, [CLS], [SEP] and
    padding have weight 0. Words beyond `sequence_length` are cut, with one warning that counts
    the sentences affected; `word_starts` records where each kept word starts (-1 if cut).

    Raises:
      ValueError naming the sentence for a tag the model does not know.
    """
    index = {tag: i for i, tag in enumerate(tags)}
    words = [word for sentence in sentences for word, _ in sentence]
    pieces = tokenizer(tf.constant(words))
    pieces = pieces.to_list() if hasattr(pieces, "to_list") else pieces
    cls, sep, unk = (tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[UNK]"))

    n = len(sentences)
    token_ids = np.zeros((n, sequence_length), "int32")
    labels = np.zeros((n, sequence_length), "int32")
    weights = np.zeros((n, sequence_length), "float32")
    word_starts, cut, offset = [], 0, 0
    for row, sentence in enumerate(sentences):
        ids, starts = [cls], []
        for position, (_, tag) in enumerate(sentence):
            if tag not in index:
                raise ValueError(f"{source}: sentence {row + 1}, word {position + 1}: unknown tag {tag!r}; known: {tags}.")
            word_pieces = list(pieces[offset + position]) or [unk]
            if (starts and starts[-1] < 0) or len(ids) + len(word_pieces) > sequence_length - 1:
                starts.append(-1)  # this word and every later one no longer fit
                continue
            starts.append(len(ids))
            labels[row, len(ids)] = index[tag]
            weights[row, len(ids)] = 1.0
            ids.extend(word_pieces)
        offset += len(sentence)
        cut += any(s < 0 for s in starts)
        ids.append(sep)
        token_ids[row, : len(ids)] = ids
        word_starts.append(starts)
    if cut:
        warnings.warn(
            f"{cut} of {n} sentences in {source} do not fit in sequence_length {sequence_length}; "
            f"their last words were cut (and count as predicted 'O').",
            stacklevel=2,
        )
    inputs = {
        "token_ids": token_ids,
        "segment_ids": np.zeros_like(token_ids),
        "padding_mask": (token_ids != 0).astype("int32"),
    }
    return inputs, labels, weights, word_starts


def decode_tags(logits, word_starts, tags):
    """Per-word predicted tags from token logits `[n, seq, tags]` (cut words get "O")."""
    best = np.asarray(logits).argmax(-1)
    return [[tags[best[row, s]] if s >= 0 else "O" for s in starts] for row, starts in enumerate(word_starts)]

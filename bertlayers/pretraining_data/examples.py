"""Pretraining examples from tokenized documents, as google-research/bert's
`create_pretraining_data.py` builds them, plus ALBERT's and RoBERTa's variants.

Modes:
  - "nsp" (BERT): `[CLS] A [SEP] B [SEP]`; B is the true continuation of A half of the time
    (label 0) and a segment of another document otherwise (label 1).
  - "sop" (ALBERT): A and B are always consecutive; half of the pairs are swapped (label 1).
  - "single" (RoBERTa FULL-SENTENCES): one segment of contiguous sentences packed up to the
    maximum length, crossing document boundaries with an extra [SEP]; label 0.
A packing target length shorter than the maximum is drawn with probability `short_seq_prob`.
"""

import dataclasses

MODES = ("nsp", "sop", "single")


@dataclasses.dataclass
class PairExample:
    """token_ids `[CLS] A [SEP] (B [SEP])` unpadded, segment_ids, and the sentence label."""

    token_ids: list
    segment_ids: list
    label: int


def _truncate_pair(tokens_a, tokens_b, max_tokens, rng):
    """Trim the longer segment, from the front or back at random, until the pair fits."""
    while len(tokens_a) + len(tokens_b) > max_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def _pack(tokens_a, tokens_b, vocab):
    token_ids = [vocab.cls_id] + tokens_a + [vocab.sep_id]
    segment_ids = [0] * len(token_ids)
    if tokens_b:
        token_ids += tokens_b + [vocab.sep_id]
        segment_ids += [1] * (len(tokens_b) + 1)
    return token_ids, segment_ids


def _pair_examples_from_document(documents, index, sequence_length, short_seq_prob, mode, vocab, rng):
    document = documents[index]
    max_tokens = sequence_length - 3
    target_length = max_tokens
    if rng.random() < short_seq_prob:
        target_length = int(rng.integers(2, max_tokens + 1))

    examples, chunk, chunk_length, i = [], [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        chunk_length += len(document[i])
        if i == len(document) - 1 or chunk_length >= target_length:
            if chunk:
                # Decide the label first: google-research/bert forces a random next segment for
                # every one-sentence chunk, which skews NSP labels (about 60% random on
                # Wikipedia). A true continuation takes the document's next sentence instead.
                random_next = mode == "nsp" and rng.random() < 0.5 and len(documents) > 1
                if len(chunk) == 1 and not random_next and i + 1 < len(document):
                    i += 1
                    chunk.append(document[i])
                elif len(chunk) == 1 and mode == "nsp" and len(documents) > 1:
                    random_next = True  # the document's last sentence: no continuation exists
                a_end = int(rng.integers(1, len(chunk))) if len(chunk) >= 2 else 1
                tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
                tokens_b, label = [], 0
                if random_next:
                    label = 1
                    target_b = target_length - len(tokens_a)
                    other = index
                    for _ in range(10):
                        other = int(rng.integers(len(documents)))
                        if other != index:
                            break
                    random_document = documents[other]
                    start = int(rng.integers(len(random_document)))
                    for sentence in random_document[start:]:
                        tokens_b.extend(sentence)
                        if len(tokens_b) >= target_b:
                            break
                    # The unused part of this chunk goes back for the next example.
                    i -= len(chunk) - a_end
                else:
                    tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
                    if mode == "sop" and tokens_b and rng.random() < 0.5:
                        tokens_a, tokens_b, label = tokens_b, tokens_a, 1
                # A pair needs two segments (a one-sentence chunk has no order to predict).
                if tokens_a and tokens_b:
                    _truncate_pair(tokens_a, tokens_b, max_tokens, rng)
                    token_ids, segment_ids = _pack(tokens_a, tokens_b, vocab)
                    examples.append(PairExample(token_ids, segment_ids, label))
            chunk, chunk_length = [], 0
        i += 1
    return examples


def _single_segment_examples(documents, sequence_length, short_seq_prob, vocab, rng):
    max_tokens = sequence_length - 2
    examples, current = [], []

    def target():
        if rng.random() < short_seq_prob:
            return int(rng.integers(2, max_tokens + 1))
        return max_tokens

    limit = target()
    for document in documents:
        if current:
            current.append(vocab.sep_id)  # the extra separator between documents
        for sentence in document:
            if current and len(current) + len(sentence) > limit:
                token_ids, segment_ids = _pack(current[:max_tokens], [], vocab)
                examples.append(PairExample(token_ids, segment_ids, 0))
                current, limit = [], target()
            current.extend(sentence)
    if current:
        token_ids, segment_ids = _pack(current[:max_tokens], [], vocab)
        examples.append(PairExample(token_ids, segment_ids, 0))
    return examples


def create_examples(documents, vocab, sequence_length, mode="nsp", short_seq_prob=0.1, rng=None, document_range=None):
    """Packed examples from `documents` (lists of sentences, each a list of WordPiece ids).

    Args:
      documents: list of documents; a document is a list of tokenized sentences.
      vocab: a `VocabularyInfo`.
      sequence_length: length of a packed example, special tokens included.
      mode: "nsp", "sop" or "single" (see the module docstring).
      short_seq_prob: probability of packing to a shorter random target length.
      rng: a `numpy.random.Generator`.
      document_range: (start, stop) to build examples from those documents only; random
        next segments still come from all documents. None: all.

    Returns:
      A list of `PairExample`s, in document order.
    """
    if mode not in MODES:
        raise ValueError(f"Unknown example mode {mode!r}; known: {', '.join(MODES)}.")
    if sequence_length < 5:
        raise ValueError(f"sequence_length must be at least 5, got {sequence_length}.")
    start, stop = document_range or (0, len(documents))
    if mode == "single":
        return _single_segment_examples(documents[start:stop], sequence_length, short_seq_prob, vocab, rng)
    examples = []
    for index in range(start, min(stop, len(documents))):
        if not documents[index]:
            continue
        examples.extend(
            _pair_examples_from_document(documents, index, sequence_length, short_seq_prob, mode, vocab, rng)
        )
    return examples

"""Masking units wider than a word: named entities and phrases, masked whole (ERNIE, Sun et al. 2019).

ERNIE masks "linguistically-informed spans": a named entity ("J. K. Rowling") or a phrase ("a
series of") is hidden as one unit, so the model must predict it from the sentence around it and
cannot copy one half from the other. The units are found in the raw text, before WordPiece
(an uncased vocabulary loses the capital letters the entity heuristic reads):

  - "entity": runs of two or more capitalized words, with lower-case connectors inside
    ("University of Oxford", "Leonardo da Vinci"); a sentence's first word only when it is not a
    common function word ("In New York" gives "New York"). A single capitalized word is a
    whole word already.
  - "phrase": collocations learned on the corpus by gensim's `Phrases` (Mikolov et al. 2013's
    score: a bigram seen `min_count` times and `threshold` more often than chance; connector
    words such as "of" may sit inside, as in "bank of america").

A unit is whole words (a word: a whitespace-separated chunk without its leading and trailing
punctuation); a unit never crosses a comma or other punctuation ending a word. Each unit is
tokenized apart from the text around it, which gives the pieces the whole sentence gives
(WordPiece's pre-tokenizer splits at whitespace and punctuation), and every piece of a unit
after its first is a `JoinedPiece`: an int, so the example builder moves it as any id, and the
masking reads it as "masked with the piece before" (`mlm_masking.word_groups`).
"""

import re
import string

UNIT_STRATEGIES = ("entity", "phrase")

_WORD = re.compile(r"\S+")
_PUNCTUATION = string.punctuation + "“”‘’«»–—…"
# Lower-case words that may sit inside a name ("Bank of England", "Vincent van Gogh").
_NAME_CONNECTORS = frozenset({"of", "de", "da", "del", "der", "di", "du", "la", "le", "van", "von", "y"})
# A sentence's capitalized first word that is not part of a name.
_SENTENCE_OPENERS = frozenset(
    "a an the in on at for by with from to as of this that these those his her its their our my your "
    "after before during when while but and or if it he she they we there here since although because "
    "however many some most several one two three".split()
)


class JoinedPiece(int):
    """A WordPiece id masked together with the piece before it: a later piece of an entity or phrase."""

    __slots__ = ()

    def __repr__(self):
        return f"JoinedPiece({int(self)})"


def word_spans(sentence):
    """[(start, end, core)]: each whitespace chunk's character span without its leading and
    trailing punctuation, and that text; chunks of punctuation only are left out."""
    words = []
    for match in _WORD.finditer(sentence):
        chunk = match.group()
        core = chunk.strip(_PUNCTUATION)
        if not core:
            continue
        start = match.start() + len(chunk) - len(chunk.lstrip(_PUNCTUATION))
        words.append((start, start + len(core), core))
    return words


def _ends_clause(sentence, word):
    """Whether punctuation right after `word` ends it (a comma, a full stop: not a unit's inside)."""
    end = word[1]
    return end < len(sentence) and sentence[end] in _PUNCTUATION


def _starts_clause(sentence, word):
    """Whether punctuation right before `word` opens it ("(France)": not the name before's end)."""
    start = word[0]
    return start > 0 and sentence[start - 1] in _PUNCTUATION


def _word_runs(sentence, words, inside, connector=lambda word: False):
    """[(first, last)] word indices of runs of two or more words that are `inside`, with
    `connector` words allowed between them, never across punctuation."""
    runs, first, last = [], None, None
    for index, word in enumerate(words):
        if first is not None and _starts_clause(sentence, word):
            if last > first:
                runs.append((first, last))
            first = None
        if inside(index, word):
            if first is None:
                first = index
            last = index
        elif not (first is not None and connector(word[2])):
            if first is not None and last > first:
                runs.append((first, last))
            first = None
        if first is not None and _ends_clause(sentence, word):
            if last > first:
                runs.append((first, last))
            first = None
    if first is not None and last > first:
        runs.append((first, last))
    return runs


def entity_runs(sentence, words=None):
    """[(first, last)] word indices of `sentence`'s capitalized runs (module docstring)."""
    words = word_spans(sentence) if words is None else words

    def capitalized(index, word):
        core = word[2]
        if not core[0].isupper():
            return False
        return index > 0 or core.lower() not in _SENTENCE_OPENERS

    return _word_runs(sentence, words, capitalized, lambda core: core in _NAME_CONNECTORS)


def phrase_model(documents, min_count=5, threshold=10.0):
    """gensim `Phrases` learned on the documents' (lists of sentence strings) lower-cased words, frozen."""
    try:
        from gensim.models.phrases import ENGLISH_CONNECTOR_WORDS, Phrases
    except ImportError as error:
        raise ValueError("Phrase masking learns its phrases with gensim: pip install gensim.") from error
    sentences = ([core.lower() for _, _, core in word_spans(s)] for document in documents for s in document)
    model = Phrases(
        sentences,
        min_count=min_count,
        threshold=threshold,
        delimiter=" ",  # never inside a word: a phrase's words are found again by splitting
        connector_words=ENGLISH_CONNECTOR_WORDS,
    )
    return model.freeze()


def phrase_runs(sentence, phrases, words=None):
    """[(first, last)] word indices of the phrases `phrases` finds in `sentence`, cut at punctuation."""
    words = word_spans(sentence) if words is None else words
    merged = phrases[[core.lower() for _, _, core in words]]
    runs, index = [], 0
    for token in merged:
        length = len(token.split(" "))
        if length > 1:
            # A phrase across a comma or bracket is two clauses: keep the part before the break.
            last = index
            while (
                last < index + length - 1
                and not _ends_clause(sentence, words[last])
                and not _starts_clause(sentence, words[last + 1])
            ):
                last += 1
            if last > index:
                runs.append((index, last))
        index += length
    return runs


def unit_segments(sentence, runs, words):
    """`sentence` cut into [(text, is_unit)]: the runs' spans (first word's start to last word's
    end) and the text between them."""
    segments, position = [], 0
    for first, last in runs:
        start, end = words[first][0], words[last][1]
        if start > position:
            segments.append((sentence[position:start], False))
        segments.append((sentence[start:end], True))
        position = end
    if position < len(sentence):
        segments.append((sentence[position:], False))
    return segments


def sentence_units(sentence, strategy, phrases=None):
    """[(text, is_unit)] of `sentence` under `strategy` ("entity" or "phrase")."""
    words = word_spans(sentence)
    runs = entity_runs(sentence, words) if strategy == "entity" else phrase_runs(sentence, phrases, words)
    return unit_segments(sentence, runs, words)


def joined_pieces(segment_pieces):
    """A sentence's ids from its segments' [(ids, is_unit)]: each unit's pieces after its first
    as `JoinedPiece`s."""
    ids = []
    for pieces, is_unit in segment_pieces:
        ids.extend(pieces[:1])
        ids.extend((JoinedPiece(p) for p in pieces[1:]) if is_unit else pieces[1:])
    return ids

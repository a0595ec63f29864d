"""Words as ELMo's character ids (allennlp's `ELMoCharacterMapper`, which ELMo's weights read).

A word is its UTF-8 bytes (ids 0-255), cut to `max_characters` - 2, between a beginning-of-word
(258) and an end-of-word (259) marker, padded with 260; every id is then shifted by one so that 0
is a padding word's. The sentence markers <S> and </S> are a word of one character, 256 and 257.
"""

import numpy as np

MAX_CHARACTERS = 50
CHARACTER_VOCABULARY = 262  # 256 bytes, 5 markers, and 0 for padding words (after the shift)
BEGINNING_OF_SENTENCE, END_OF_SENTENCE = 256, 257
BEGINNING_OF_WORD, END_OF_WORD, PADDING = 258, 259, 260
SENTENCE_START, SENTENCE_END = "<S>", "</S>"


def _marked(characters, max_characters):
    ids = [PADDING] * max_characters
    ids[0] = BEGINNING_OF_WORD
    ids[1 : 1 + len(characters)] = characters
    ids[1 + len(characters)] = END_OF_WORD
    return [i + 1 for i in ids]


def character_ids(word: str, max_characters: int = MAX_CHARACTERS) -> list:
    """`word`'s `max_characters` character ids (module docstring)."""
    if max_characters < 3:
        raise ValueError(f"max_characters must be at least 3, got {max_characters}.")
    if word == SENTENCE_START:
        return _marked([BEGINNING_OF_SENTENCE], max_characters)
    if word == SENTENCE_END:
        return _marked([END_OF_SENTENCE], max_characters)
    return _marked(list(word.encode("utf-8", "ignore")[: max_characters - 2]), max_characters)


def sentence_character_ids(words: list, max_characters: int = MAX_CHARACTERS) -> np.ndarray:
    """int32 `[len(words) + 2, max_characters]`: <S>, the words, </S>."""
    return np.array([character_ids(w, max_characters) for w in (SENTENCE_START, *words, SENTENCE_END)], dtype=np.int32)


def batch_character_ids(sentences: list, max_characters: int = MAX_CHARACTERS) -> dict:
    """The biLM's inputs for `sentences` (lists of words): `character_ids` int32 `[B, S, C]`, each
    sentence between <S> and </S> and padded with all-zero words to the longest, and `padding_mask`
    `[B, S]`."""
    length = max(len(s) for s in sentences) + 2
    characters = np.zeros((len(sentences), length, max_characters), np.int32)
    mask = np.zeros((len(sentences), length), np.int32)
    for row, words in enumerate(sentences):
        characters[row, : len(words) + 2] = sentence_character_ids(words, max_characters)
        mask[row, : len(words) + 2] = 1
    return {"character_ids": characters, "padding_mask": mask}

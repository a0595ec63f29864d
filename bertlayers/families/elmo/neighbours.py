"""ELMo's "play" table (Peters et al. 2018, Table 4): a static embedding's nearest words against
the biLM's nearest contexts.

A static vector (word2vec, GloVe) gives "play" one neighbourhood whatever the sentence; the biLM's
vector of "play" in a sentence depends on the sentence, and its nearest "play" among other
sentences is one of the same sense ("a spectacular play" in a game, "a play" on a stage).
"""

import numpy as np

from bertlayers.families.elmo.characters import batch_character_ids


def bilm_layers(encoder, sentences: list, batch_size: int = 32) -> list:
    """The biLM's layers for each sentence (a list of words): float32 `[L + 1, n + 2, 2P]` each,
    positions 0 and n + 1 being <S> and </S>. `encoder` is a biLM's `finished_encoder()`."""
    out = []
    for start in range(0, len(sentences), batch_size):
        chunk = sentences[start : start + batch_size]
        layers = np.asarray(encoder(batch_character_ids(chunk))["layers"])
        out.extend(layers[row, :, : len(words) + 2] for row, words in enumerate(chunk))
    return out


def contexts_of(word: str, sentences: list) -> list:
    """[(sentence index, word position)] of each sentence holding `word` (its first occurrence)."""
    return [(i, s.index(word)) for i, s in enumerate(sentences) if word in s]


def nearest_contexts(encoder, word: str, sentences: list, layer: int = -1) -> tuple:
    """(contexts, similarity): `word`'s contexts in `sentences` (`contexts_of`) and the cosine
    similarity `[n, n]` of the biLM's `layer` vectors of `word` in them (the diagonal -inf)."""
    contexts = contexts_of(word, sentences)
    if len(contexts) < 2:
        raise ValueError(f"{word!r} appears in {len(contexts)} sentence(s): a neighbour needs two.")
    layers = bilm_layers(encoder, [sentences[i] for i, _ in contexts])
    vectors = np.stack([layers[k][layer, position + 1] for k, (_, position) in enumerate(contexts)])  # <S> first
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -np.inf)
    return contexts, similarity

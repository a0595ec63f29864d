"""The biLM's layers probed per word (`bertlayers.runs.probing.probe_word_states`): a biLM reads
words, so each word's state is its own position's (no first piece to pick)."""

import numpy as np

from bertlayers.families.elmo.neighbours import bilm_layers
from bertlayers.runs.probing import probe_word_states


def bilm_word_states(encoder, sentences: list, batch_size: int = 32) -> list:
    """L + 1 arrays `[words, 2P]`: every layer of the biLM (`encoder`, its `finished_encoder()`) at
    every word of `sentences` (lists of words), in order (<S> and </S> left out)."""
    layers = bilm_layers(encoder, sentences, batch_size)  # each [L + 1, n + 2, 2P]
    return [np.concatenate([sentence[j, 1:-1] for sentence in layers]) for j in range(layers[0].shape[0])]


def probe_bilm_layers(encoder, train: list, evaluation: list, tags: list, **settings) -> list:
    """`probe_layers` for a biLM: probes per layer on CoNLL sentences ([(word, tag), ...]); the
    settings are `probe_word_states`'s."""
    index = {tag: i for i, tag in enumerate(tags)}
    words = lambda sentences: [[w for w, _ in s] for s in sentences]  # noqa: E731
    labels = lambda sentences: np.array([index[t] for s in sentences for _, t in s], np.int64)  # noqa: E731
    lengths = np.cumsum([len(s) for s in evaluation])[:-1]

    def sentence_tags(predicted):
        return [[tags[i] for i in part] for part in np.split(np.asarray(predicted), lengths)]

    return probe_word_states(
        bilm_word_states(encoder, words(train)),
        labels(train),
        bilm_word_states(encoder, words(evaluation)),
        labels(evaluation),
        sentence_tags,
        [[t for _, t in s] for s in evaluation],
        tags,
        **settings,
    )

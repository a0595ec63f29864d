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

    train_states = bilm_word_states(encoder, words(train))
    eval_states = bilm_word_states(encoder, words(evaluation))
    # Standardized with the training words' statistics: the biLM's layers are not normalized (the
    # character CNN's projection and the clipped LSTM outputs differ in scale by layer), and a probe
    # trained by one learning rate for every layer should not depend on that.
    scales = [(x.mean(0), x.std(0) + 1e-6) for x in train_states]
    train_states = [(x - m) / s for x, (m, s) in zip(train_states, scales)]
    eval_states = [(x - m) / s for x, (m, s) in zip(eval_states, scales)]
    return probe_word_states(
        train_states,
        labels(train),
        eval_states,
        labels(evaluation),
        sentence_tags,
        [[t for _, t in s] for s in evaluation],
        tags,
        **settings,
    )

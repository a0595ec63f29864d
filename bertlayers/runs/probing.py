"""What each layer encodes: a linear probe on every hidden state of a frozen encoder.

Which representations are better at predicting a token's tag (the lecture notes on ELMo: "different
layers are expected to encode different information"; Tenney et al. 2019): for each hidden state
j = 0 (the embeddings) .. L, the state at each word's first piece is a fixed feature, and a
multinomial logistic regression trained on those features alone predicts the word's tag:

    p(tag | word) = softmax(W_j · h_j(word) + b_j)      minimizing mean cross-entropy + λ · ‖W_j‖²

The probe is linear on purpose: what it reads must already be in the state, not computed by the
probe. The encoder never trains (inference mode: no dropout), so every layer's probe sees the same
encoder.
"""

import logging

import keras
import numpy as np

from bertlayers.families.elmo.neighbours import bilm_layers
from bertlayers.metrics.entities import entity_scores
from bertlayers.models.predictor import compiled_predictor
from bertlayers.task_data.ner import encode_sentences, word_tags
from bertlayers.utils.validation import NON_NEGATIVE_FLOAT, POSITIVE_FLOAT, POSITIVE_INT

__all__ = [
    "bilm_word_states",
    "fit_probe",
    "fit_probes",
    "probe_bilm_layers",
    "probe_layers",
    "probe_word_states",
    "word_states",
]

logger = logging.getLogger(__name__)


def word_states(encoder, inputs, word_starts, batch_size=64):
    """Every hidden state at each word's first piece: L + 1 arrays `[words, H]` (the embeddings
    first), words in sentence order; words cut by the sequence length (start -1) left out. The
    encoder runs compiled (`compiled_predictor`), a batch at a time, and only the words' rows are kept."""
    predict = compiled_predictor(encoder)
    rows, positions = _word_positions(word_starts)
    parts = []
    for first in range(0, len(word_starts), batch_size):
        outputs = predict({name: np.asarray(value[first : first + batch_size]) for name, value in inputs.items()})
        layers = [outputs["embedding_output"], *outputs["encoder_outputs"]]  # L + 1 x [b, S, H]
        chosen = (rows >= first) & (rows < first + batch_size)
        parts.append([np.asarray(layer, "float32")[rows[chosen] - first, positions[chosen]] for layer in layers])
    return [np.concatenate(layer) for layer in zip(*parts)]


def fit_probe(features, labels, num_classes, l2=1e-4, epochs=20, batch_size=256, learning_rate=1e-2, seed=0):
    """A logistic regression `[words, H] -> [words, num_classes]` logits, trained with Adam on mean
    cross-entropy + `l2` · ‖W‖² (the bias unpenalized). `batch_size` None: the whole set at every
    step (full-batch descent)."""
    features = np.asarray(features, "float32")
    probes = fit_probes([features], labels, num_classes, l2, epochs, batch_size, learning_rate, seed)
    return keras.Sequential([keras.Input(features.shape[1:]), keras.layers.Reshape((1, -1)), probes.layers[-1],
                             keras.layers.Reshape((num_classes,))])  # fmt: skip


def fit_probes(states, labels, num_classes, l2=1e-4, epochs=20, batch_size=256, learning_rate=1e-2, seed=0):
    """`fit_probe` for each of `states` (arrays `[words, H]` of one width, the same words), trained
    together: one model `[words, P, H] -> [words, P, num_classes]` whose loss is the sum of the P
    probes' losses. A probe's gradient is its own loss's and Adam steps each weight on its own, so
    each probe trains as it would alone (the same initial weights, the same batches), in one traced
    step instead of P (a probe's fit is mostly Keras's tracing and set-up at a probe's size)."""
    l2 = NON_NEGATIVE_FLOAT.check("l2", l2)
    epochs = POSITIVE_INT.check("epochs", epochs)
    learning_rate = POSITIVE_FLOAT.check("learning_rate", learning_rate)
    batch_size = None if batch_size is None else POSITIVE_INT.check("batch_size", batch_size)
    states, labels = [np.asarray(x, "float32") for x in states], np.asarray(labels, "int32")
    if any(x.ndim != 2 or x.shape != states[0].shape for x in states) or labels.shape != states[0].shape[:1]:
        raise ValueError(
            f"fit_probe takes features [words, H] and labels [words], got {[x.shape for x in states]} and "
            f"{labels.shape}."
        )
    if len(labels) and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"fit_probe: labels must lie in [0, {num_classes}), got {labels.min()}..{labels.max()}.")
    count, width = len(states), states[0].shape[1]
    keras.utils.set_random_seed(seed)
    glorot = keras.initializers.GlorotUniform()  # a Dense's own initializer: each probe starts as one alone
    probes = keras.Sequential(
        [
            keras.Input((count, width)),
            keras.layers.EinsumDense(
                "wph,phc->wpc",
                output_shape=(count, num_classes),
                bias_axes="pc",
                kernel_initializer=lambda shape, dtype=None: keras.ops.tile(
                    glorot(shape[1:], dtype)[None], [count, 1, 1]
                ),
                kernel_regularizer=keras.regularizers.L2(l2) if l2 else None,
            ),
        ]
    )

    def summed_cross_entropy(y, logits):  # [words, P] -> [words]: each probe's mean, summed over probes
        return keras.ops.sum(keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True), axis=-1)

    probes.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=summed_cross_entropy)
    x, y = np.stack(states, axis=1), np.repeat(labels[:, None], count, axis=1)
    if batch_size is None:
        # Full-batch descent: every epoch is one step on the same batch, so the epochs run as the
        # steps of one: Keras's set-up of an epoch costs ~20x the step itself at a probe's size.
        probes.fit(_the_whole_set(x, y), steps_per_epoch=epochs, epochs=1, shuffle=False, verbose=0)
    else:
        probes.fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=True, verbose=0)
    return probes


def _the_whole_set(features, labels):
    while True:
        yield features, labels


def probe_layers(
    encoder,
    tokenizer,
    train,
    evaluation,
    tags,
    sequence_length=64,
    l2=1e-4,
    epochs=20,
    batch_size=256,
    learning_rate=1e-2,
    seeds=(0,),
):
    """Probes per hidden state of `encoder` on tagged sentences (CoNLL: [(word, tag), ...]), one for
    each seed (the probe's initialization and batch order; the states are computed once).

    Args:
      tokenizer: the encoder's `CheckpointTokenizer`; tags: the tag list (index = class).
      train, evaluation: the sentences the probes train and are scored on.

    Returns:
      One dict per hidden state j = 0..L: `layer`, the majority-tag `baseline_accuracy`, and for
      each measure its list over the seeds (`runs`) with `mean`, `min` and `max`: `accuracy`
      (words), `entity_word_accuracy` (words whose gold tag is not "O"), `entity_f1` (exact entity
      spans, conlleval's count).
    """
    x_train, y_train, _, train_starts = encode_sentences(train, tokenizer, sequence_length, tags, "train")
    x_eval, y_eval, _, eval_starts = encode_sentences(evaluation, tokenizer, sequence_length, tags, "evaluation")
    train_labels = y_train[_word_positions(train_starts)]  # the tag id at each kept word's first piece
    eval_rows, eval_positions = _word_positions(eval_starts)

    def sentence_tags(predicted):
        tag_ids = np.zeros_like(y_eval)
        tag_ids[eval_rows, eval_positions] = predicted  # back at each word's first piece: task_data's decoding
        return word_tags(tag_ids, eval_starts, tags)

    return probe_word_states(
        word_states(encoder, x_train, train_starts),
        train_labels,
        word_states(encoder, x_eval, eval_starts),
        y_eval[eval_rows, eval_positions],
        sentence_tags,
        [[tag for _, tag in sentence] for sentence in evaluation],
        tags,
        l2=l2,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        seeds=seeds,
    )


def probe_word_states(
    train_states,
    train_labels,
    eval_states,
    eval_labels,
    sentence_tags,
    gold,
    tags,
    l2=1e-4,
    epochs=20,
    batch_size=256,
    learning_rate=1e-2,
    seeds=(0,),
):
    """`probe_layers`'s probes over states computed any way (a WordPiece encoder's first pieces, a
    biLM's words): `train_states`, `eval_states` one `[words, H]` array per hidden state,
    `train_labels`, `eval_labels` the words' tag ids, `sentence_tags(predicted ids) -> [[tag, ...]]`
    the evaluation sentences' predicted tags (for entity F1 against `gold`, their tags)."""
    majority = np.bincount(train_labels, minlength=len(tags)).argmax()
    entity = eval_labels != tags.index("O") if "O" in tags else np.ones(len(eval_labels), bool)
    by_layer = [{"accuracy": [], "entity_word_accuracy": [], "entity_f1": []} for _ in train_states]
    held_out = np.stack([np.asarray(x, "float32") for x in eval_states], axis=1)  # [words, L + 1, H]
    for seed in seeds:  # every hidden state's probe at once (`fit_probes`)
        probes = fit_probes(train_states, train_labels, len(tags), l2, epochs, batch_size, learning_rate, seed)
        predictions = np.asarray(probes.predict(held_out, batch_size=1024, verbose=0)).argmax(-1)  # [words, L + 1]
        for layer, predicted in enumerate(predictions.T):
            by_layer[layer]["accuracy"].append(float(np.mean(predicted == eval_labels)))
            by_layer[layer]["entity_word_accuracy"].append(float(np.mean(predicted[entity] == eval_labels[entity])))
            by_layer[layer]["entity_f1"].append(entity_scores(gold, sentence_tags(predicted))["f1"])
    results = []
    for layer, runs in enumerate(by_layer):
        result = {"layer": layer, "baseline_accuracy": float(np.mean(eval_labels == majority))}
        for name, values in runs.items():
            result[name] = {"mean": float(np.mean(values)), "min": min(values), "max": max(values), "runs": values}
        results.append(result)
        logger.info(
            f"layer {layer}: accuracy {result['accuracy']['mean']:.4f}, entity F1 {result['entity_f1']['mean']:.1f}"
        )
    return results


def _word_positions(word_starts):
    """(rows, positions) int arrays of every kept word's first piece, in word order."""
    kept = [(row, start) for row, starts in enumerate(word_starts) for start in starts if start >= 0]
    return np.array([row for row, _ in kept], "int64"), np.array([start for _, start in kept], "int64")


# A biLM (ELMo) reads words, so each word's state is its own position's: no first piece to pick.


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

"""ELMo vectors as features of a task model (Peters et al. 2018, section 3.3): the biLM frozen,
only the scalar mix and the task network trained; beside or instead of static word vectors.

    ELMo_k = γ Σ_j softmax(s)_j h_k,j        over the biLM's L + 1 layers      [B, S, 2P]
    x_k = [ELMo_k; v(w_k)]                   v: static vectors (word2vec), frozen [B, S, 2P + D]
    h = BiLSTM(x)  →  logits = W h + b       final states, one vector a text     [B, C]

"Concatenate word2vec/GloVe with ELMo" (notes 003) is the model with both; either alone is a row
of the comparison.
"""

import keras
import numpy as np

from bertlayers.families.elmo.characters import batch_character_ids
from bertlayers.families.elmo.data import bilm_words
from bertlayers.layers.bidirectional_lstm import BidirectionalLSTM
from bertlayers.layers.scalar_mix import ScalarMix


class FrozenBilmLayers(keras.layers.Layer):
    """The biLM encoder's L + 1 layers, computed with `training=False` whatever the caller passes,
    and no gradient into it. Call args: `character_ids`, `padding_mask`. Returns: L + 1 `[B, S, 2P]`."""

    def __init__(self, encoder, **kwargs):
        super().__init__(**kwargs)
        encoder.trainable = False
        self.encoder = encoder
        self.built = True

    def call(self, character_ids, padding_mask):
        layers = self.encoder({"character_ids": character_ids, "padding_mask": padding_mask}, training=False)["layers"]
        layers = keras.ops.stop_gradient(layers)  # [B, L + 1, S, 2P]
        return [layers[:, j] for j in range(layers.shape[1])]


def word_feature_classifier(
    num_classes: int,
    elmo_encoder: keras.Model | None = None,
    word_vectors: np.ndarray | None = None,
    lstm_units: int = 64,
    dropout: float = 0.3,
    layer_norm: bool = False,
) -> keras.Model:
    """A text classifier over ELMo vectors (`elmo_encoder`, a biLM's `finished_encoder()`), static
    word vectors (`word_vectors` `[W, D]`, row 0 for unknown words and padding), or both.

    Inputs: `character_ids` `[B, S, 50]`, `padding_mask` `[B, S]`, `word_ids` `[B, S]` (rows of
    `word_vectors`). Output: `logits` `[B, num_classes]`. `layer_norm`: the biLM's layers are
    normalized before the mix (`ScalarMix(layer_norm=True)`, ELMo's section 3.2)."""
    if elmo_encoder is None and word_vectors is None:
        raise ValueError("word_feature_classifier needs ELMo (elmo_encoder), static word vectors, or both.")
    characters = keras.Input(shape=(None, None), dtype="int32", name="character_ids")
    padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
    word_ids = keras.Input(shape=(None,), dtype="int32", name="word_ids")
    features = []
    if elmo_encoder is not None:
        layers = FrozenBilmLayers(elmo_encoder, name="frozen_bilm")(characters, padding_mask)
        features.append(ScalarMix(layer_norm=layer_norm, name="scalar_mix")(layers))  # [B, S, 2P]
    if word_vectors is not None:
        table = keras.layers.Embedding(
            word_vectors.shape[0],
            word_vectors.shape[1],
            embeddings_initializer=keras.initializers.Constant(word_vectors),
            trainable=False,
            name="word_vectors",
        )
        features.append(table(word_ids))  # [B, S, D]
    x = features[0] if len(features) == 1 else keras.layers.Concatenate(name="features")(features)
    pooled = BidirectionalLSTM(lstm_units, return_sequences=False, dropout=dropout, name="bilstm")(x, padding_mask)
    logits = keras.layers.Dense(num_classes, name="logits")(pooled)  # [B, C]
    return keras.Model(
        {"character_ids": characters, "padding_mask": padding_mask, "word_ids": word_ids}, {"logits": logits}
    )


def word_feature_inputs(texts: list, word_index: dict, max_words: int = 64) -> dict:
    """The classifier's inputs for `texts`: each text's words (`bilm_words`, cut to `max_words`)
    between <S> and </S>, padded to the longest; `word_ids` from `word_index` (0 when unknown)."""
    sentences = [bilm_words(text)[:max_words] for text in texts]
    inputs = batch_character_ids(sentences)
    ids = np.zeros(inputs["padding_mask"].shape, np.int32)
    for row, words in enumerate(sentences):
        ids[row, 1 : len(words) + 1] = [word_index.get(w, 0) for w in words]
    return {**inputs, "word_ids": ids}


class WordFeatureBatches(keras.utils.PyDataset):
    """`word_feature_inputs` batches of `texts` (each padded to its own longest text), with `labels`;
    a new order each epoch from `seed` (None: the given order, for evaluation)."""

    def __init__(self, texts, labels, word_index, batch_size=32, seed=None, max_words=64, **kwargs):
        super().__init__(**kwargs)
        self.texts, self.labels = list(texts), np.asarray(labels, np.int32)
        self.word_index, self.batch_size, self.max_words = word_index, batch_size, max_words
        self.rng = None if seed is None else np.random.default_rng(seed)
        self.order = np.arange(len(self.texts))
        self.on_epoch_end()

    def __len__(self):
        return -(-len(self.texts) // self.batch_size)

    def __getitem__(self, index):
        rows = self.order[index * self.batch_size : (index + 1) * self.batch_size]
        x = word_feature_inputs([self.texts[i] for i in rows], self.word_index, self.max_words)
        return x, self.labels[rows]

    def on_epoch_end(self):
        if self.rng is not None:
            self.order = self.rng.permutation(len(self.texts))

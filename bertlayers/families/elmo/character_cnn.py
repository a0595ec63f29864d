"""A word's vector from its characters: ELMo's character CNN (Kim et al. 2016; Peters et al. 2018)."""

from collections.abc import Callable

import keras
from keras import ops

from bertlayers.families.elmo.highway import Highway
from bertlayers.layers.initializers import clone_initializer

# ELMo's published encoder: filters of widths 1..7, 2,048 in all.
ELMO_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


@keras.saving.register_keras_serializable(package="bertlayers")
class CharacterCnn(keras.layers.Layer):
    """Character ids of each word → one vector per word.

    Dimensions: B batch, S words, C characters per word, E character embedding, F filters in
    all, P output width.

        e = CharEmbedding(ids)                                  [B, S, C, E]
        m_k = act(max over positions of Conv1D_k(e))            [B, S, F_k]   per width k
        h = Highway([m_1; ...; m_K])                            [B, S, F]
        out = W_p h + b_p                                       [B, S, P]

    Character id 0 is padding: its embedding is zero (ELMo's table's row 0 is too); padded
    positions still take part in the max-pool, as in ELMo.

    Args:
      filters: ((width, count), ...) of the convolutions over characters.
      character_vocabulary: how many character ids (ELMo: 262, bytes and markers, +1).
      character_embedding: E.
      highway_layers: Highway layers after the convolutions.
      output_width: P (None: F, no projection).
      activation: after the max-pool (ELMo: relu).
      kernel_initializer: of every kernel.

    Call args:
      character_ids: int `[B, S, C]`, C at least the widest filter.

    Returns:
      `[B, S, P]`.
    """

    def __init__(
        self,
        filters: tuple = ELMO_FILTERS,
        character_vocabulary: int = 262,
        character_embedding: int = 16,
        highway_layers: int = 2,
        output_width: int | None = 512,
        activation: str | Callable = "relu",
        kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.filters = tuple((int(width), int(count)) for width, count in filters)
        if not self.filters or any(width < 1 or count < 1 for width, count in self.filters):
            raise ValueError(f"CharacterCnn: filters must be (width, count) pairs of positive ints, got {filters}.")
        self.character_vocabulary = int(character_vocabulary)
        self.character_embedding = int(character_embedding)
        self.highway_layers = int(highway_layers)
        self.output_width = None if output_width is None else int(output_width)
        self.activation = keras.activations.get(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, character_ids_shape):
        embedded = (None, character_ids_shape[-1], self.character_embedding)  # [B*S, C, E]
        self.embedding = keras.layers.Embedding(
            self.character_vocabulary,
            self.character_embedding,
            embeddings_initializer=keras.initializers.RandomUniform(-1.0, 1.0),
            dtype=self.dtype_policy,
            name="character_embedding",
        )
        self.embedding.build(None)
        self.convolutions = []
        for width, count in self.filters:
            convolution = keras.layers.Conv1D(
                count,
                width,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                dtype=self.dtype_policy,
                name=f"convolution_{width}",
            )
            convolution.build(embedded)
            self.convolutions.append(convolution)
        width = sum(count for _, count in self.filters)
        self.highway = None
        if self.highway_layers:
            self.highway = Highway(
                self.highway_layers,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                dtype=self.dtype_policy,
                name="highway",
            )
            self.highway.build((None, None, width))
        self.projection = None
        if self.output_width is not None:
            self.projection = keras.layers.Dense(
                self.output_width,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                dtype=self.dtype_policy,
                name="projection",
            )
            self.projection.build((None, None, width))
        self.built = True

    def call(self, character_ids):
        shape = ops.shape(character_ids)  # B, S, C
        ids = ops.reshape(character_ids, (-1, shape[-1]))  # [B*S, C]
        # Padding's row is zero: the table's row 0 is masked rather than learned.
        not_padding = ops.cast(ops.not_equal(ids, 0), self.compute_dtype)[..., None]  # [B*S, C, 1]
        embedded = self.embedding(ids) * not_padding  # [B*S, C, E]
        pooled = [
            self.activation(ops.max(convolution(embedded), axis=1))  # [B*S, F_k]
            for convolution in self.convolutions
        ]
        features = ops.concatenate(pooled, axis=-1)  # [B*S, F]
        if self.highway is not None:
            features = self.highway(features)
        if self.projection is not None:
            features = self.projection(features)  # [B*S, P]
        return ops.reshape(features, (shape[0], shape[1], features.shape[-1]))  # [B, S, P]

    def compute_output_shape(self, character_ids_shape):
        width = self.output_width or sum(count for _, count in self.filters)
        return tuple(character_ids_shape[:2]) + (width,)

    def get_config(self):
        return {
            **super().get_config(),
            "filters": [list(f) for f in self.filters],
            "character_vocabulary": self.character_vocabulary,
            "character_embedding": self.character_embedding,
            "highway_layers": self.highway_layers,
            "output_width": self.output_width,
            "activation": keras.activations.serialize(self.activation),
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }

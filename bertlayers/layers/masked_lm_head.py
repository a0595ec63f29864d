"""Masked language model head with the output projection tied to the token embedding."""

import keras
from keras import ops

from bertlayers import backend
from bertlayers.layers.activations import canonical_activation, get_activation
from bertlayers.layers.initializers import bert_initializer, clone_initializer
from bertlayers.layers.input_checks import check_integer_ids
from bertlayers.layers.registered import registered_class, registered_name


@keras.saving.register_keras_serializable(package="bertlayers")
class MaskedLMHead(keras.layers.Layer):
    """Predict the original token at each masked position (google-research/bert `cls/predictions`).

        h      = sequence[b, masked_positions[b, p]]           [batch, P, H]
        h      = LN(act(W · h + b))                            [batch, P, E]
        logits = h · TokenEmbᵀ + output_bias                   [batch, P, V]

    Only the P masked positions are projected onto the vocabulary: with P = 20 of 128 tokens
    that is 6x less work than projecting every position.

    Args:
      token_embedding: the encoder's `keras.layers.ReversibleEmbedding` `[V, E]`; the output
        projection is its transpose (tied weights). E may differ from H (ALBERT).
      vocabulary_size: `V`, only when no `token_embedding` is given; then the head owns an
        untied `[H, V]` output kernel.
      activation: activation of the transform ("gelu" in BERT).
      layer_norm_epsilon: LayerNorm epsilon.
      kernel_initializer: initializer of the transform (and untied output) kernel.
      use_bias: the transform's bias (`b`; ModernBERT's head has none).
      normalization: the norm's class (or registered name); default LayerNorm
        (`BiasFreeLayerNorm` in ModernBERT).
      transform: False projects the sequence onto the vocabulary directly, with no dense layer
        and norm before (EuroBERT's `lm_head`, after its encoder's final norm).

    Call args:
      sequence: `[batch, seq, H]` encoder output.
      masked_positions: int `[batch, P]` positions to predict (padding entries point anywhere,
        typically 0, and are weighted out of the loss); None predicts every row of `sequence`:
        a left-to-right language model's every position, or rows the caller already picked
        (the pretrainers pass the encoder's `sequence_output_at` rows, computed only there).

    Returns:
      float32 logits `[batch, P, V]`.

    Serialization: the config carries the embedding's config, so a head restored on its own
    owns a copy. Models that tie the head to an encoder re-create the tie in `from_config`.
    """

    def __init__(
        self,
        token_embedding: keras.layers.Layer | None = None,
        vocabulary_size: int | None = None,
        activation: str = "gelu",
        layer_norm_epsilon: float = 1e-12,
        kernel_initializer: str | keras.initializers.Initializer | None = None,
        use_bias: bool = True,
        normalization: str | type | None = None,
        transform: bool = True,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.use_bias = bool(use_bias)
        self.transform = bool(transform)
        self._normalization = registered_class(normalization, "normalization") if normalization is not None else None
        if isinstance(token_embedding, dict):
            token_embedding = keras.layers.deserialize(token_embedding)
        if token_embedding is None and vocabulary_size is None:
            raise ValueError("MaskedLMHead needs a token_embedding to tie to, or a vocabulary_size.")
        if token_embedding is not None:
            if vocabulary_size is not None and int(vocabulary_size) != token_embedding.input_dim:
                raise ValueError(
                    f"vocabulary_size {vocabulary_size} disagrees with the tied token_embedding's "
                    f"{token_embedding.input_dim} ids."
                )
            vocabulary_size = token_embedding.input_dim
        self.token_embedding = token_embedding
        self.vocabulary_size = int(vocabulary_size)
        self.activation = canonical_activation(activation)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.kernel_initializer = keras.initializers.get(kernel_initializer or bert_initializer())
        self._activation_fn = get_activation(self.activation)

    def build(self, sequence_shape, masked_positions_shape=None):
        hidden_size = sequence_shape[-1]
        tied = self.token_embedding is not None
        width = self.token_embedding.output_dim if tied else hidden_size
        gathered_shape = (sequence_shape[0], None, hidden_size)
        if not self.transform:
            if tied and self.token_embedding.output_dim != hidden_size:
                raise ValueError(
                    f"MaskedLMHead(transform=False) projects the sequence (width {hidden_size}) with the token "
                    f"embedding (width {self.token_embedding.output_dim}): the widths must agree."
                )
            width = hidden_size
        self.transform_dense = self.layer_norm = None
        if self.transform:
            self._build_transform(gathered_shape, width)
        if tied:
            if not self.token_embedding.built:
                self.token_embedding.build()
        else:
            self.output_dense = keras.layers.Dense(
                self.vocabulary_size,
                use_bias=False,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                dtype=self.dtype_policy,
                name="output",
            )
            self.output_dense.build(gathered_shape[:-1] + (width,))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocabulary_size,), initializer="zeros")
        self.built = True

    def _build_transform(self, gathered_shape, width):
        self.transform_dense = keras.layers.Dense(
            width,
            use_bias=self.use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="transform",
        )
        self.transform_dense.build(gathered_shape)
        self.layer_norm = (self._normalization or keras.layers.LayerNormalization)(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm"
        )
        self.layer_norm.build(gathered_shape[:-1] + (width,))

    def call(self, sequence, masked_positions=None):
        if masked_positions is None:
            gathered = sequence
        else:
            check_integer_ids(masked_positions, "masked_positions")
            gathered = backend.rows_at(sequence, masked_positions)
        hidden = gathered
        if self.transform:
            hidden = self.layer_norm(self._activation_fn(self.transform_dense(gathered)))
        if self.token_embedding is not None:
            logits = self.token_embedding(hidden, reverse=True)
        else:
            logits = self.output_dense(hidden)
        logits = ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")
        return logits

    def compute_output_shape(self, sequence_shape, masked_positions_shape=None):
        positions_shape = (
            tuple(sequence_shape[:-1]) if masked_positions_shape is None else tuple(masked_positions_shape)
        )
        return positions_shape + (self.vocabulary_size,)

    def compute_output_spec(self, sequence, masked_positions=None):
        positions_shape = None if masked_positions is None else masked_positions.shape
        return keras.KerasTensor(self.compute_output_shape(sequence.shape, positions_shape), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "token_embedding": (keras.layers.serialize(self.token_embedding) if self.token_embedding else None),
                "vocabulary_size": self.vocabulary_size,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "use_bias": self.use_bias,
                "transform": self.transform,
                "normalization": registered_name(self._normalization) if self._normalization else None,
            }
        )
        return config

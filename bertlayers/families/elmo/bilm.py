"""ELMo's bidirectional language model (Peters et al. 2018): a character CNN gives each word a
vector, a forward and a backward stack of projected LSTMs read the sentence each way, and one
softmax (shared by both directions) predicts the next word forward and the previous word backward.

Dimensions: B batch, S words (with <S> and </S>), C characters per word, P projection width
(every layer's output per direction), U LSTM cell width, V word vocabulary, L LSTM layers.

    x_t = CharacterCnn(chars_t)                                    [B, S, P]
    →h_t^1 = LSTMP→(x_1..x_t),  →h_t^k = LSTMP→(→h^(k-1))_t + →h_t^(k-1)   (residual, k > 1)
    ←h_t^1 = LSTMP←(x_t..x_n),  ←h_t^k likewise from the end               [B, S, P] each
    layers: [x; x], [→h^1; ←h^1], ..., [→h^L; ←h^L]                  L + 1 x [B, S, 2P]
    forward loss  = mean over t of −log softmax(W →h_t^L + b)[w_(t+1)]
    backward loss = mean over t of −log softmax(W ←h_t^L + b)[w_(t-1)]
    loss = forward loss + backward loss   (the paper's joint log-likelihood, per word)

The forward state at t has read words 1..t only and predicts word t+1; the backward state at t
has read words t..n only and predicts word t-1: neither sees the word it predicts.
"""

import keras
from keras import ops

from bertlayers import backend
from bertlayers.backend import TensorLike
from bertlayers.families.elmo.character_cnn import CharacterCnn
from bertlayers.layers.weighted_mean import weighted_mean
from bertlayers.utils.validation import POSITIVE_INT


@keras.saving.register_keras_serializable(package="bertlayers")
class ProjectedLstmCell(keras.layers.Layer):
    """One step of ELMo's LSTM with a projection (LSTMP, Sak et al. 2014; allennlp's
    `LstmCellWithProjection`): the recurrent state is the projected one.

        i, f, g, o = split(W_x x_t + W_h h_(t-1) + b)         [B, 4U]
        c_t = clip(σ(f) ⊙ c_(t-1) + σ(i) ⊙ tanh(g), ±cell_clip)  [B, U]
        h_t = clip(W_p (σ(o) ⊙ tanh(c_t)), ±projection_clip)   [B, P]

    The forget gate's bias starts at 1. For `keras.layers.RNN`: states (h, c), output h.

    Args:
      units: U. projection_units: P. cell_clip, projection_clip: None for no clipping (ELMo: 3).
    """

    def __init__(
        self,
        units: int,
        projection_units: int,
        cell_clip: float | None = None,
        projection_clip: float | None = None,
        kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.units = POSITIVE_INT.check("units", units)
        self.projection_units = POSITIVE_INT.check("projection_units", projection_units)
        self.cell_clip = None if cell_clip is None else float(cell_clip)
        self.projection_clip = None if projection_clip is None else float(projection_clip)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.state_size = [self.projection_units, self.units]
        self.output_size = self.projection_units

    def build(self, inputs_shape):
        units = self.units
        self.input_kernel = self.add_weight(
            name="input_kernel", shape=(inputs_shape[-1], 4 * units), initializer=self.kernel_initializer
        )
        self.state_kernel = self.add_weight(
            name="state_kernel", shape=(self.projection_units, 4 * units), initializer="orthogonal"
        )
        self.bias = self.add_weight(
            name="bias",
            shape=(4 * units,),
            initializer=keras.initializers.Constant([0.0] * units + [1.0] * units + [0.0] * 2 * units),
        )
        self.projection_kernel = self.add_weight(
            name="projection_kernel", shape=(units, self.projection_units), initializer=self.kernel_initializer
        )
        self.built = True

    def call(self, inputs, states, training=None):
        previous_h, previous_c = states  # [B, P], [B, U]
        gates = ops.matmul(inputs, self.input_kernel) + ops.matmul(previous_h, self.state_kernel) + self.bias
        input_gate, forget_gate, candidate, output_gate = ops.split(gates, 4, axis=-1)  # [B, U] each
        cell = ops.sigmoid(forget_gate) * previous_c + ops.sigmoid(input_gate) * ops.tanh(candidate)
        if self.cell_clip is not None:
            cell = ops.clip(cell, -self.cell_clip, self.cell_clip)
        h = ops.matmul(ops.sigmoid(output_gate) * ops.tanh(cell), self.projection_kernel)  # [B, P]
        if self.projection_clip is not None:
            h = ops.clip(h, -self.projection_clip, self.projection_clip)
        return h, [h, cell]

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "projection_units": self.projection_units,
            "cell_clip": self.cell_clip,
            "projection_clip": self.projection_clip,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }


def reverse_within_lengths(sequence: TensorLike, padding_mask: TensorLike) -> TensorLike:
    """`sequence` `[B, S, ...]` with each example's real (leading) positions in reverse order and
    its padding left in place: the backward LSTM reads from each sentence's own end."""
    lengths = ops.sum(ops.cast(padding_mask, "int32"), axis=1, keepdims=True)  # [B, 1]
    positions = ops.arange(ops.shape(padding_mask)[1], dtype="int32")[None, :]  # [1, S]
    source = ops.where(positions < lengths, lengths - 1 - positions, positions)  # [B, S]
    source = ops.reshape(source, ops.shape(source) + (1,) * (len(sequence.shape) - 2))
    return ops.take_along_axis(sequence, ops.broadcast_to(source, ops.shape(sequence)), axis=1)


@keras.saving.register_keras_serializable(package="bertlayers")
class LanguageModelLstm(keras.layers.Layer):
    """A stack of `ProjectedLstmCell` layers reading one way, residual from the second layer on.

    Call args:
      sequence: `[B, S, P]`. padding_mask: `[B, S]`, real tokens first.

    Returns:
      a list of L `[B, S, P]`, each layer's states (zero at padding), in the sentence's order.
    """

    def __init__(
        self,
        num_layers: int,
        units: int,
        projection_units: int,
        backward: bool = False,
        cell_clip: float | None = None,
        projection_clip: float | None = None,
        dropout: float = 0.0,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.num_layers = POSITIVE_INT.check("num_layers", num_layers)
        self.units, self.projection_units = int(units), int(projection_units)
        self.backward = bool(backward)
        self.cell_clip, self.projection_clip = cell_clip, projection_clip
        self.dropout = float(dropout)

    def build(self, sequence_shape, padding_mask_shape=None):
        self.recurrent = []
        for index in range(self.num_layers):
            cell = ProjectedLstmCell(
                self.units,
                self.projection_units,
                self.cell_clip,
                self.projection_clip,
                dtype=self.dtype_policy,
                name=f"cell_{index}",
            )
            layer = keras.layers.RNN(cell, return_sequences=True, dtype=self.dtype_policy, name=f"lstm_{index}")
            layer.build(tuple(sequence_shape[:-1]) + ((sequence_shape[-1] if index == 0 else self.projection_units),))
            self.recurrent.append(layer)
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def call(self, sequence, padding_mask, training=None):
        mask = ops.cast(padding_mask, "bool")  # [B, S]
        real = ops.cast(mask, sequence.dtype)[..., None]  # [B, S, 1]
        x = reverse_within_lengths(sequence, mask) if self.backward else sequence  # [B, S, P]
        outputs = []
        for index, layer in enumerate(self.recurrent):
            h = layer(x, mask=mask, training=training) * real  # [B, S, P]
            if index:
                h = h + x  # the residual connection between layers
            outputs.append(h)
            x = self.dropout_layer(h, training=training)
        if self.backward:
            outputs = [reverse_within_lengths(h, mask) for h in outputs]
        return outputs

    def compute_output_shape(self, sequence_shape, padding_mask_shape=None):
        return [tuple(sequence_shape[:-1]) + (self.projection_units,)] * self.num_layers

    def get_config(self):
        return {
            **super().get_config(),
            "num_layers": self.num_layers,
            "units": self.units,
            "projection_units": self.projection_units,
            "backward": self.backward,
            "cell_clip": self.cell_clip,
            "projection_clip": self.projection_clip,
            "dropout": self.dropout,
        }


@keras.saving.register_keras_serializable(package="bertlayers")
class BidirectionalLanguageModel(keras.Model):
    """ELMo's biLM (module docstring) as a functional model.

    Inputs: `character_ids` int `[B, S, C]` (`elmo.characters.character_ids`; a padding word is
    all zeros), `padding_mask` `[B, S]`, and, for training, `word_ids` `[B, S]` (the words'
    vocabulary ids: the targets; not read by the forward pass).
    Outputs: `layers` `[B, L + 1, S, 2P]` (what `ScalarMix` mixes into ELMo vectors),
    `forward_logits`, `backward_logits` `[B, S, V]`.
    Logged: `forward_loss`, `backward_loss` (their exponentials are the perplexities).

    Args:
      vocabulary_size: V, the softmax's words.
      filters, character_embedding, highway_layers: the `CharacterCnn`'s.
      num_layers, units, projection_units: L, U, P.
      cell_clip, projection_clip: the LSTMP's clipping (ELMo: 3.0 both).
      dropout: between LSTM layers and before the softmax.
    """

    def __init__(
        self,
        vocabulary_size: int,
        filters: tuple = ((1, 32), (2, 32), (3, 64), (4, 128)),
        character_embedding: int = 16,
        highway_layers: int = 2,
        num_layers: int = 2,
        units: int = 512,
        projection_units: int = 128,
        cell_clip: float | None = 3.0,
        projection_clip: float | None = 3.0,
        dropout: float = 0.1,
        name: str = "bidirectional_language_model",
        **kwargs,
    ) -> None:
        settings = dict(
            vocabulary_size=POSITIVE_INT.check("vocabulary_size", vocabulary_size),
            filters=[list(f) for f in filters],
            character_embedding=int(character_embedding),
            highway_layers=int(highway_layers),
            num_layers=int(num_layers),
            units=int(units),
            projection_units=int(projection_units),
            cell_clip=cell_clip,
            projection_clip=projection_clip,
            dropout=float(dropout),
        )
        characters = keras.Input(shape=(None, None), dtype="int32", name="character_ids")
        padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
        word_ids = keras.Input(shape=(None,), dtype="int32", name="word_ids")
        token_encoder = CharacterCnn(
            filters,
            character_embedding=character_embedding,
            highway_layers=highway_layers,
            output_width=projection_units,
            name="character_cnn",
        )
        tokens = token_encoder(characters)  # [B, S, P]
        directions = {
            name: LanguageModelLstm(
                num_layers,
                units,
                projection_units,
                backward=name == "backward",
                cell_clip=cell_clip,
                projection_clip=projection_clip,
                dropout=dropout,
                name=f"{name}_lstm",
            )
            for name in ("forward", "backward")
        }
        forward = directions["forward"](tokens, padding_mask)  # L x [B, S, P]
        backward = directions["backward"](tokens, padding_mask)  # L x [B, S, P]
        layers = [ops.concatenate([tokens, tokens], axis=-1)]  # layer 0: [B, S, 2P]
        layers += [ops.concatenate([f, b], axis=-1) for f, b in zip(forward, backward)]
        softmax = keras.layers.Dense(vocabulary_size, name="softmax")  # shared by both directions
        top_dropout = keras.layers.Dropout(dropout, name="softmax_dropout")
        outputs = {
            "layers": ops.stack(layers, axis=1),  # [B, L + 1, S, 2P]
            "forward_logits": softmax(top_dropout(forward[-1])),  # [B, S, V]
            "backward_logits": softmax(top_dropout(backward[-1])),  # [B, S, V]
        }
        inputs = {"character_ids": characters, "padding_mask": padding_mask, "word_ids": word_ids}
        super().__init__(inputs=inputs, outputs=outputs, name=name, **kwargs)
        self.settings = settings
        self.token_encoder, self.softmax = token_encoder, softmax
        self.forward_lstm, self.backward_lstm = directions["forward"], directions["backward"]
        self.trackers = {name: keras.metrics.Mean(name=name) for name in ("forward_loss", "backward_loss")}
        # A tuple, not a dict: Keras would track a dict attribute as its own type, and a functional
        # model built on that type refuses plain dicts.
        self._encoder_graph = (characters, padding_mask, outputs["layers"])

    def finished_encoder(self) -> keras.Model:
        """The biLM without its softmax: `character_ids` and `padding_mask` in, `layers`
        `[B, L + 1, S, 2P]` out (its layers and weights shared): what ELMo vectors are mixed from."""
        characters, padding_mask, layers = self._encoder_graph
        inputs = {"character_ids": characters, "padding_mask": padding_mask}
        return keras.Model(inputs=inputs, outputs={"layers": layers}, name="elmo_encoder")

    def language_model_losses(self, x, y_pred):
        """{"forward_loss", "backward_loss"}: each direction's mean cross-entropy per predicted
        word, forward at t for word t+1, backward at t for word t-1 (real words only)."""
        words, mask = x["word_ids"], ops.cast(x["padding_mask"], "float32")
        # Word t+1 exists exactly where position t+1 is real; then t is real too.
        targets_exist = mask[:, 1:]  # [B, S-1]
        forward = keras.losses.sparse_categorical_crossentropy(
            words[:, 1:], y_pred["forward_logits"][:, :-1], from_logits=True
        )  # [B, S-1]
        backward = keras.losses.sparse_categorical_crossentropy(
            words[:, :-1], y_pred["backward_logits"][:, 1:], from_logits=True
        )  # [B, S-1]
        return {
            "forward_loss": weighted_mean(forward, targets_exist),
            "backward_loss": weighted_mean(backward, targets_exist),
        }

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        losses = self.language_model_losses(x, y_pred)
        for name, value in losses.items():
            self.trackers[name].update_state(value)
        return backend.scale_loss_for_distribution(losses["forward_loss"] + losses["backward_loss"])

    def get_config(self):
        return {"name": self.name, **self.settings}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

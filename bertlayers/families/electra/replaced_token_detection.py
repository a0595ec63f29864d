"""ELECTRA's replaced-token detection (Clark et al. 2020): corrupting the input with the
generator's samples, and the discriminator's per-token head."""

import keras
from keras import ops

from bertlayers import backend
from bertlayers.layers.activations import canonical_activation, get_activation
from bertlayers.layers.initializers import bert_initializer, clone_initializer


@keras.saving.register_keras_serializable(package="bertlayers")
class ReplacedTokenDetectionHead(keras.layers.Layer):
    """One logit per token: was it replaced? (google-research/electra's
    `discriminator_predictions`; transformers' `ElectraDiscriminatorPredictions`)

        h      = act(W1 · x + b1)          [batch, seq, H]
        logits = w2 · h + b2               [batch, seq]

    Args:
      activation: the encoder's activation ("gelu").
      kernel_initializer: initializer of both kernels.

    Call args:
      sequence: `[batch, seq, H]` discriminator output.

    Returns:
      float32 logits `[batch, seq]`; sigmoid(logit) is the probability of "replaced".
    """

    def __init__(self, activation="gelu", kernel_initializer=None, **kwargs):
        super().__init__(**kwargs)
        self.activation = canonical_activation(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer or bert_initializer())
        self._activation_fn = get_activation(self.activation)

    def build(self, sequence_shape):
        hidden_size = sequence_shape[-1]
        self.dense = keras.layers.Dense(
            hidden_size,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="dense",
        )
        self.dense.build(sequence_shape)
        self.prediction = keras.layers.Dense(
            1,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="prediction",
        )
        self.prediction.build(tuple(sequence_shape[:-1]) + (hidden_size,))
        self.built = True

    def call(self, sequence):
        hidden = self._activation_fn(self.dense(sequence))  # [batch, seq, H]
        return ops.cast(ops.squeeze(self.prediction(hidden), axis=-1), "float32")  # [batch, seq]

    def compute_output_shape(self, sequence_shape):
        return tuple(sequence_shape[:-1])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "activation": self.activation,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="bertlayers")
class GeneratorCorruption(keras.layers.Layer):
    """The discriminator's input: the original tokens, with a token sampled from the generator
    at every masked position, and which positions now differ from the original.

        sample[b, p]   ~ softmax(generator_logits[b, p] / temperature)    [batch, P]
        corrupted      = original, with corrupted[b, positions[b, p]] = sample[b, p]
        replaced[b, s] = 1 where s is a masked position and corrupted != original

    The sample is drawn without gradient (the discriminator's loss does not train the
    generator through it). Padding predictions (weight 0) change nothing. Given a
    `sample_seed`, the draw is stateless: the same batch and seed give the same sample, so a
    resumed run corrupts exactly as an uninterrupted one would (the data pipeline supplies a
    seed per batch); without one it draws from the layer's `SeedGenerator`.

    Args:
      temperature: of the sampling softmax (1.0 in ELECTRA).
      seed: of the sampler's `keras.random.SeedGenerator`.

    Call args:
      generator_logits: float `[batch, P, V]`.
      token_ids: int `[batch, seq]`, the generator's (masked) input.
      masked_positions, masked_lm_ids: int `[batch, P]`: where, and the original tokens there.
      masked_lm_weights: `[batch, P]`, 1 for real predictions, 0 for padding.
      sample_seed: optional int `[batch, 2]`; row 0 seeds this batch's (this replica's) draw.

    Returns:
      (corrupted token ids int32 `[batch, seq]`, replaced labels float32 `[batch, seq]`).
    """

    def __init__(self, temperature=1.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.temperature = float(temperature)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, generator_logits, token_ids, masked_positions, masked_lm_ids, masked_lm_weights, sample_seed=None):
        vocabulary_size = ops.shape(generator_logits)[-1]
        logits = ops.stop_gradient(ops.cast(generator_logits, "float32")) / self.temperature
        flat = ops.reshape(logits, (-1, vocabulary_size))  # [batch * P, V]
        if sample_seed is None:
            sample = keras.random.categorical(flat, 1, dtype="int32", seed=self.seed_generator)
        else:
            sample = backend.categorical(flat, sample_seed[0])
        sample = ops.reshape(sample, ops.shape(masked_positions))  # [batch, P]

        sequence_length = ops.shape(token_ids)[1]
        real = ops.cast(masked_lm_weights, "bool")  # [batch, P]
        # [batch, P, seq]: prediction p sits at position s (padding predictions nowhere).
        at = ops.logical_and(
            ops.equal(ops.expand_dims(masked_positions, -1), ops.arange(sequence_length, dtype="int32")),
            ops.expand_dims(real, -1),
        )
        masked = ops.any(at, axis=1)  # [batch, seq]

        def scattered(values):  # values at the masked positions, 0 elsewhere: [batch, seq]
            return ops.sum(ops.where(at, ops.expand_dims(ops.cast(values, "int32"), -1), 0), axis=1)

        original = ops.where(masked, scattered(masked_lm_ids), token_ids)
        corrupted = ops.where(masked, scattered(sample), token_ids)
        replaced = ops.logical_and(masked, ops.not_equal(corrupted, original))
        return corrupted, ops.cast(replaced, "float32")

    def compute_output_spec(self, generator_logits, token_ids, *args, **kwargs):
        return (
            keras.KerasTensor(token_ids.shape, dtype="int32"),
            keras.KerasTensor(token_ids.shape, dtype="float32"),
        )

    def get_config(self):
        config = super().get_config()
        config.update({"temperature": self.temperature, "seed": self.seed})
        return config

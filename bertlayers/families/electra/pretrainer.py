"""ELECTRA (Clark et al. 2020): a small generator fills masked positions with plausible
tokens, and the discriminator, the encoder kept after pretraining, tells each token apart
as original or replaced.

Dimensions: B batch, S sequence, P masked predictions, V vocabulary, E embedding width,
H discriminator width, G generator width.

    masked ids  --generator-->  MLM logits [B, P, V]  --sample-->  corrupted ids [B, S]
    corrupted ids  --discriminator-->  [B, S, H]  --head-->  replaced logits [B, S]
    loss = MLM(generator) + λ · mean over real tokens of sigmoid-CE(replaced logits, labels)

The two encoders share one embedding layer (token, position and segment tables and their
LayerNorm, width E); each projects E to its own width when they differ. Following
google-research/electra: 15% of the non-special tokens are chosen per batch, 85% of those
become [MASK] and 15% stay (no random replacement), the generator is sampled at
temperature 1 without gradient, and a position is "replaced" only where the sample differs
from the original token.

Two-stage training (the paper's section 3.2, `ElectraGeneratorPretrainer` then
`ElectraPretrainer(train_generator=False)`): the generator is trained alone on MLM, the
discriminator starts as a copy of it, and is then trained on replaced-token detection with
the generator frozen.
"""

import keras
from keras import ops

from bertlayers import backend
from bertlayers.families.electra.replaced_token_detection import GeneratorCorruption, ReplacedTokenDetectionHead
from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.weighted_mean import weighted_mean
from bertlayers.models.encoder_model import EncoderModel, encoder_inputs
from bertlayers.models.pretrainer import masked_lm_head
from bertlayers.networks.encoder_base import INPUT_NAMES
from bertlayers.utils.validation import POSITIVE_FLOAT

PREDICTION_INPUTS = ("masked_positions", "masked_lm_ids", "masked_lm_weights")


def _discriminator_head(encoder, name):
    return ReplacedTokenDetectionHead(
        activation=encoder.config.activation,
        kernel_initializer=bert_initializer(encoder.config.initializer_range),
        dtype=encoder.layer_dtype_policy,
        name=name,
    )


def _prediction_inputs(inputs):
    """`inputs` (the encoder's) with the masked predictions' and the sample seed's added."""
    for input_name in PREDICTION_INPUTS:
        dtype = "float32" if input_name == "masked_lm_weights" else "int32"
        inputs[input_name] = keras.Input(shape=(None,), dtype=dtype, name=input_name)
    inputs["sample_seed"] = keras.Input(shape=(2,), dtype="int32", name="sample_seed")
    return inputs


def _generator_logits(generator, head, inputs):
    """The generator's MLM logits at the masked positions `[B, P, V]`: its last layer is computed
    there only (all its head reads)."""
    encoder_input = {name: inputs[name] for name in INPUT_NAMES}
    masked_states = generator.sequence_output_at(
        generator(encoder_input), inputs["masked_positions"], inputs["padding_mask"]
    )  # [B, P, H_g]
    return head(masked_states)  # [B, P, V]


def _mlm_values(x, mlm_logits):
    """{"mlm_loss", "mlm_accuracy"}: the generator's loss and accuracy over real predictions."""
    labels, prediction_weights = x["masked_lm_ids"], x["masked_lm_weights"]
    mlm_losses = keras.losses.sparse_categorical_crossentropy(labels, mlm_logits, from_logits=True)  # [B, P]
    predicted = ops.cast(ops.argmax(mlm_logits, -1), "int32")
    return {
        "mlm_loss": weighted_mean(mlm_losses, prediction_weights),
        "mlm_accuracy": weighted_mean(ops.equal(predicted, ops.cast(labels, "int32")), prediction_weights),
    }


@keras.saving.register_keras_serializable(package="bertlayers")
class ElectraPretrainer(EncoderModel):
    """Generator + discriminator, trained together on replaced-token detection.

    Inputs: the encoder's three (`token_ids` already masked), and `masked_positions`,
    `masked_lm_ids` (the original tokens there), `masked_lm_weights` (1 real, 0 padding),
    each `[B, P]`; `sample_seed` int `[B, 2]` (keys the generator's sample: see
    `GeneratorCorruption`).
    Outputs: `mlm` generator logits `[B, P, V]`; `rtd` discriminator logits `[B, S]`;
    `replaced` its labels `[B, S]` (1.0 where the corrupted token differs from the original).

    The loss is computed by the model (`compute_loss`): its labels are drawn inside the step.
    Logged: `mlm_loss` (the generator's), `rtd_loss`, `rtd_accuracy` over real tokens,
    `rtd_baseline_accuracy` (answering "original" everywhere), `rtd_auc` (ranking replaced
    above original tokens; 0.5 is chance), `replaced_fraction` (of the masked positions),
    `mlm_accuracy`.

    Args:
      encoder: the discriminator (a `BertEncoder`), the encoder fine-tuning starts from.
      generator: a `BertEncoder` built on the same embedding layer (`electra_encoders`), or
        with `train_generator=False` on its own (`two_stage_discriminator`).
      discriminator_weight: λ (50 in ELECTRA).
      temperature: of the generator's sampling softmax.
      train_generator: False for two-stage training's second stage: the generator and its head
        are frozen (not trainable: no optimizer update, weight decay included), the loss is
        λ · the discriminator's alone, and the discriminator has its own embeddings (shared
        ones would freeze with the generator). The generator's MLM loss is still logged.
    """

    uses_pooled_output = False

    def __init__(
        self,
        encoder,
        generator,
        discriminator_weight=50.0,
        temperature=1.0,
        train_generator=True,
        name="electra_pretrainer",
        trainable=True,
        **kwargs,
    ):
        discriminator_weight = POSITIVE_FLOAT.check("discriminator_weight", discriminator_weight)
        temperature = POSITIVE_FLOAT.check("temperature", temperature)
        if train_generator:
            self._check_sharing(encoder, generator)
        elif generator.embeddings is encoder.embeddings:
            raise ValueError(
                "ElectraPretrainer(train_generator=False): the generator is frozen, and the discriminator "
                "shares its embedding layer, which would freeze with it; give the discriminator its own "
                "(two_stage_discriminator)."
            )
        inputs = _prediction_inputs(encoder_inputs())
        encoder_input = {name: inputs[name] for name in INPUT_NAMES}
        generator_head = masked_lm_head(generator, "generator_head")
        mlm_logits = _generator_logits(generator, generator_head, inputs)  # [B, P, V]
        if not train_generator:  # once built: a sublayer built later would make trainable variables
            generator.trainable = False
            generator_head.trainable = False
        corruption = GeneratorCorruption(temperature=temperature, name="corruption")
        corrupted, replaced = corruption(
            mlm_logits,
            inputs["token_ids"],
            inputs["masked_positions"],
            inputs["masked_lm_ids"],
            inputs["masked_lm_weights"],
            inputs["sample_seed"],
        )  # [B, S] each
        discriminator_head = _discriminator_head(encoder, "discriminator_head")
        rtd_logits = discriminator_head(encoder({**encoder_input, "token_ids": corrupted})["sequence_output"])  # [B, S]
        outputs = {"mlm": mlm_logits, "rtd": rtd_logits, "replaced": replaced}
        super().__init__(inputs=inputs, outputs=outputs, name=name, trainable=trainable, **kwargs)

        self.encoder = encoder
        self.generator = generator
        self.generator_head = generator_head
        self.discriminator_head = discriminator_head
        self.corruption = corruption
        self.discriminator_weight = float(discriminator_weight)
        self.temperature = float(temperature)
        self.train_generator = bool(train_generator)
        self.head_names = ["mlm", "rtd"]
        self.trackers = {
            name: keras.metrics.Mean(name=name)
            for name in (
                "mlm_loss",
                "mlm_accuracy",
                "rtd_loss",
                "rtd_accuracy",
                "rtd_baseline_accuracy",
                "replaced_fraction",
            )
        }
        # How well the discriminator ranks replaced tokens above original ones (0.5: chance),
        # which shows learning before any probability crosses 0.5.
        self.rtd_auc = keras.metrics.AUC(name="rtd_auc", from_logits=True)

    @staticmethod
    def _check_sharing(encoder, generator):
        """A ValueError unless the two encoders share their embeddings as this pretrainer trains them."""
        if generator.embeddings is not encoder.embeddings:
            raise ValueError(
                "ElectraPretrainer: the generator must share the discriminator's embedding layer "
                "(build both with electra_encoders, or pass embedding_layer=encoder.embeddings)."
            )

    def unused_layers(self):
        return [self.encoder.pooler, self.generator.pooler]

    def default_losses(self):
        return None  # compute_loss: the discriminator's labels are made inside the step

    def default_metrics(self):
        return None

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """Generator MLM loss + λ · discriminator loss, each a weighted mean (google-research/electra):
        the MLM over real predictions (`masked_lm_weights`), the discriminator over real
        tokens (`padding_mask`). `y` and `sample_weight` are not needed: the targets are in x."""
        prediction_weights, token_weights = x["masked_lm_weights"], x["padding_mask"]
        replaced, logits = y_pred["replaced"], y_pred["rtd"]
        # Sigmoid cross-entropy from logits, stable for large |logit|.
        rtd_losses = ops.maximum(logits, 0.0) - logits * replaced + ops.log1p(ops.exp(-ops.abs(logits)))  # [B, S]
        rtd_loss = weighted_mean(rtd_losses, token_weights)

        predicted = ops.cast(logits > 0, "float32")
        values = {
            **_mlm_values(x, y_pred["mlm"]),
            "rtd_loss": rtd_loss,
            "rtd_accuracy": weighted_mean(ops.equal(predicted, replaced), token_weights),
            "rtd_baseline_accuracy": weighted_mean(1.0 - replaced, token_weights),
            "replaced_fraction": ops.sum(replaced)
            / ops.maximum(ops.sum(ops.cast(prediction_weights, "float32")), 1e-6),
        }
        for name, value in values.items():
            self.trackers[name].update_state(value)
        self.rtd_auc.update_state(replaced, logits, sample_weight=ops.cast(token_weights, "float32"))
        total = self.discriminator_weight * rtd_loss
        if self.train_generator:
            total = values["mlm_loss"] + total
        return backend.scale_loss_for_distribution(total)

    def _constructor_args(self):
        return {
            "generator": keras.saving.serialize_keras_object(self.generator),
            "discriminator_weight": self.discriminator_weight,
            "temperature": self.temperature,
            "train_generator": self.train_generator,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        encoder = keras.saving.deserialize_keras_object(config.pop("encoder"))
        generator = config.pop("generator")
        if not config.get("train_generator", True):  # two-stage: the generator has its own embeddings
            return cls(encoder, keras.saving.deserialize_keras_object(generator), **config)
        # The saved generator holds a copy of the embedding layer; share the discriminator's again.
        generator_class = keras.saving.get_registered_object(generator["registered_name"])
        generator = generator_class.from_config({**generator["config"], "embedding_layer": encoder.embeddings})
        return cls(encoder, generator, **config)


@keras.saving.register_keras_serializable(package="bertlayers")
class ElectraGeneratorPretrainer(EncoderModel):
    """Two-stage training's first stage: the generator alone on masked-LM, over ELECTRA's batches.

    Inputs: `ElectraPretrainer`'s (`sample_seed` is read by the second stage only). Output:
    `mlm` logits `[B, P, V]`. The loss (`compute_loss`) and the logged `mlm_loss`,
    `mlm_accuracy` are `ElectraPretrainer`'s. `encoder` is the generator: the second stage's
    discriminator starts as a copy of it (`two_stage_discriminator`).
    """

    uses_pooled_output = False

    def __init__(self, encoder, name="electra_generator_pretrainer", trainable=True, **kwargs):
        inputs = _prediction_inputs(encoder_inputs())
        generator_head = masked_lm_head(encoder, "generator_head")
        mlm_logits = _generator_logits(encoder, generator_head, inputs)  # [B, P, V]
        # `sample_seed` stays an (unused) input: both stages read the same batches.
        super().__init__(inputs=inputs, outputs={"mlm": mlm_logits}, name=name, trainable=trainable, **kwargs)
        self.encoder = encoder
        self.generator_head = generator_head
        self.head_names = ["mlm"]
        self.trackers = {name: keras.metrics.Mean(name=name) for name in ("mlm_loss", "mlm_accuracy")}

    def unused_layers(self):
        return [self.encoder.pooler]

    def default_losses(self):
        return None

    def default_metrics(self):
        return None

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        values = _mlm_values(x, y_pred["mlm"])
        for name, value in values.items():
            self.trackers[name].update_state(value)
        return backend.scale_loss_for_distribution(values["mlm_loss"])


@keras.saving.register_keras_serializable(package="bertlayers")
class ElectraDiscriminator(EncoderModel):
    """A pretrained discriminator: encoder + replaced-token head (transformers'
    `ElectraForPreTraining`). Inputs: the encoder's. Outputs: `rtd` logits `[B, S]` and
    the encoder's `sequence_output`."""

    uses_pooled_output = False
    checkpoint_model_type = "electra"  # save_huggingface's default: what a vocab.txt cannot say

    def __init__(self, encoder, name="electra_discriminator", trainable=True, **kwargs):
        inputs = encoder_inputs()
        head = _discriminator_head(encoder, "discriminator_head")
        sequence = encoder(inputs)["sequence_output"]
        super().__init__(
            inputs=inputs,
            outputs={"rtd": head(sequence), "sequence_output": sequence},
            name=name,
            trainable=trainable,
            **kwargs,
        )
        self.encoder = encoder
        self.discriminator_head = head


@keras.saving.register_keras_serializable(package="bertlayers")
class ElectraGenerator(EncoderModel):
    """A pretrained generator: encoder + masked-LM head tied to its token embedding, over
    every position (transformers' `ElectraForMaskedLM`). Inputs: the encoder's. Output:
    `mlm` logits `[B, S, V]`."""

    uses_pooled_output = False
    checkpoint_model_type = "electra"  # save_huggingface's default: what a vocab.txt cannot say

    def __init__(self, encoder, name="electra_generator", trainable=True, **kwargs):
        inputs = encoder_inputs()
        head = masked_lm_head(encoder, "generator_head")
        super().__init__(
            inputs=inputs,
            outputs={"mlm": head(encoder(inputs)["sequence_output"])},
            name=name,
            trainable=trainable,
            **kwargs,
        )
        self.encoder = encoder
        self.generator_head = head

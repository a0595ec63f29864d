"""ELECTRA's pretraining recipe: masked records for the generator, a sample seed per batch.

`--option two_stage=true` trains as the paper's section 3.2 does: the generator alone on
masked-LM for half the steps (stage "generator"), then the discriminator, a copy of the trained
generator, on replaced-token detection for the other half with the generator frozen (stage
"discriminator"). The generator then has the discriminator's size (`generator_fraction` 1).
"""

from bertlayers.families.electra.encoders import (
    GENERATOR_FRACTION,
    electra_embeddings,
    electra_encoder,
    electra_encoders,
    two_stage_discriminator,
)
from bertlayers.families.electra.pretrainer import ElectraGeneratorPretrainer, ElectraPretrainer
from bertlayers.families.recipes import Option, Recipe, Stage, register_recipe
from bertlayers.pretraining_data.objectives import DataObjective, masked_lm_batch
from bertlayers.startup import require_tensorflow
from bertlayers.utils.validation import BOOLEAN, POSITIVE_FLOAT

tf = require_tensorflow(__name__)


def _electra_batch(features, seed, context):
    x, labels, weights = masked_lm_batch(features, seed, context, dynamic=True)
    x["masked_lm_ids"] = labels
    x["masked_lm_weights"] = weights
    # Its own stream, apart from the masks' (dynamic_mask splits `seed` itself).
    sample_seed = tf.cast(tf.random.experimental.stateless_fold_in(seed, 1), tf.int32)
    x["sample_seed"] = tf.tile(sample_seed[tf.newaxis], [tf.shape(labels)[0], 1])
    return x, {"mlm": labels}


OBJECTIVE = DataObjective(
    examples="single",
    masking="dynamic",
    batch_inputs=_electra_batch,
    masking_rates={"mask_token_rate": 0.85, "random_token_rate": 0.0},
)


def build_pretrainer(encoder_config, dtype, options):
    discriminator, generator = electra_encoders(encoder_config, options["generator_fraction"], dtype=dtype)
    return ElectraPretrainer(
        discriminator,
        generator,
        discriminator_weight=options["discriminator_weight"],
        temperature=options["temperature"],
    )


def _generator_stage(encoder_config, dtype, options, previous):
    """The generator alone, of the discriminator's size (its copy starts the next stage)."""
    embeddings = electra_embeddings(encoder_config, dtype)
    return ElectraGeneratorPretrainer(electra_encoder(encoder_config, embeddings, dtype, "generator"))


def _discriminator_stage(encoder_config, dtype, options, previous):
    """The discriminator, a copy of `previous`'s trained generator, trained with it frozen."""
    generator = previous.encoder
    model = ElectraPretrainer(
        two_stage_discriminator(generator, dtype),
        generator,
        discriminator_weight=options["discriminator_weight"],
        temperature=options["temperature"],
        train_generator=False,
    )
    model.generator_head.set_weights(previous.generator_head.get_weights())
    return model


def _stages(options):
    if not options["two_stage"]:
        return ()
    if options["generator_fraction"] not in (GENERATOR_FRACTION_DEFAULT, 1.0):
        raise ValueError(
            "two_stage=true starts the discriminator as a copy of the generator, which therefore has the "
            f"discriminator's size: give no generator_fraction (got {options['generator_fraction']})."
        )
    return (
        Stage("generator", _generator_stage, "mlm_loss", ("mlm_accuracy",)),
        Stage("discriminator", _discriminator_stage, "mlm_loss", REPORT),
    )


GENERATOR_FRACTION_DEFAULT = 0.25
REPORT = ("rtd_loss", "rtd_accuracy", "rtd_baseline_accuracy", "rtd_auc", "replaced_fraction")
RECIPE = register_recipe(
    Recipe(
        "electra",
        "replaced-token detection: generator + discriminator sharing embeddings (Clark et al. 2020)",
        OBJECTIVE,
        build_pretrainer,
        options={
            "generator_fraction": Option(
                GENERATOR_FRACTION_DEFAULT, GENERATOR_FRACTION, "generator width / discriminator's"
            ),
            "discriminator_weight": Option(50.0, POSITIVE_FLOAT, "the discriminator loss's weight (λ)"),
            "temperature": Option(1.0, POSITIVE_FLOAT, "of the generator's sampling softmax"),
            "two_stage": Option(
                False,
                BOOLEAN,
                "train the generator alone for half the steps, then a copy of it as the discriminator "
                "with the generator frozen (the generator is the discriminator's size)",
            ),
        },
        report=REPORT,
        continues_checkpoint=False,  # a generator and a discriminator
        stages=_stages,
    )
)

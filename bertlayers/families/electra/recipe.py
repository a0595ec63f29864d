"""ELECTRA's pretraining recipe: masked records for the generator, a sample seed per batch."""

from bertlayers.families.electra.encoders import GENERATOR_FRACTION, electra_encoders
from bertlayers.families.electra.pretrainer import ElectraPretrainer
from bertlayers.families.recipes import Option, Recipe, register_recipe
from bertlayers.pretraining_data.objectives import DataObjective, masked_lm_batch
from bertlayers.startup import require_tensorflow
from bertlayers.utils.validation import POSITIVE_FLOAT

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


RECIPE = register_recipe(
    Recipe(
        "electra",
        "replaced-token detection: generator + discriminator sharing embeddings (Clark et al. 2020)",
        OBJECTIVE,
        build_pretrainer,
        options={
            "generator_fraction": Option(0.25, GENERATOR_FRACTION, "generator width / discriminator's"),
            "discriminator_weight": Option(50.0, POSITIVE_FLOAT, "the discriminator loss's weight (λ)"),
            "temperature": Option(1.0, POSITIVE_FLOAT, "of the generator's sampling softmax"),
        },
        report=("rtd_loss", "rtd_accuracy", "rtd_baseline_accuracy", "rtd_auc", "replaced_fraction"),
        continues_checkpoint=False,  # a generator and a discriminator
    )
)

"""ELECTRA (Clark et al. 2020): replaced-token detection's layers, the generator and
discriminator encoders, the pretrainer and task models, the recipe and Hugging Face
checkpoints, in one folder.

Importing it registers the recipe "electra" and transformers' model_type "electra".
"""

from bertlayers.families.electra.encoders import (
    electra_embeddings,
    electra_encoder,
    electra_encoders,
    generator_config,
    two_stage_discriminator,
)
from bertlayers.families.electra.pretrainer import (
    ElectraDiscriminator,
    ElectraGenerator,
    ElectraGeneratorPretrainer,
    ElectraPretrainer,
)
from bertlayers.families.electra.replaced_token_detection import GeneratorCorruption, ReplacedTokenDetectionHead
from bertlayers.startup import tensorflow_available

if tensorflow_available():  # checkpoints with their tokenizer; tf.data objective
    from bertlayers.families.electra.checkpoint import electra_config_from_huggingface, load_huggingface_electra
    from bertlayers.families.electra.recipe import OBJECTIVE, RECIPE

__all__ = [
    "ElectraDiscriminator",
    "ElectraGenerator",
    "ElectraGeneratorPretrainer",
    "ElectraPretrainer",
    "GeneratorCorruption",
    "OBJECTIVE",
    "RECIPE",
    "ReplacedTokenDetectionHead",
    "electra_config_from_huggingface",
    "electra_embeddings",
    "electra_encoder",
    "electra_encoders",
    "generator_config",
    "load_huggingface_electra",
    "two_stage_discriminator",
]

"""DeBERTa-v3's pretraining recipe: ELECTRA's masked records and replaced-token detection, on
DeBERTa's architecture at the preset's sizes, with gradient-disentangled embedding sharing.

What it takes from He et al. (2023): the generator as wide as the discriminator with half its
layers, λ = 50, the sharing (`embedding_sharing`: "gdes", the paper's; "es", one table both
losses train, for the ablation); the data are ELECTRA's (15% of tokens chosen, 85% of those
[MASK]ed, dynamic masking) over the run's WordPiece vocabulary.
"""

from bertlayers.families.deberta_v2.encoder import DebertaV2Encoder
from bertlayers.families.deberta_v2.presets import deberta_v3_config
from bertlayers.families.deberta_v2.pretrainer import (
    EMBEDDING_SHARING,
    GENERATOR_DEPTH,
    DebertaV3Pretrainer,
    deberta_v3_encoders,
)
from bertlayers.families.electra.recipe import OBJECTIVE
from bertlayers.families.electra.recipe import RECIPE as ELECTRA
from bertlayers.families.recipes import Option, Recipe, register_recipe
from bertlayers.utils.validation import Choice


def deberta_v3_sized_like(config):
    """DeBERTa-v3's architecture at `config`'s sizes (a BERT preset's): the same layers, width, heads
    and inner width; disentangled attention in place of the position table and segments."""
    if config.architecture == DebertaV2Encoder.architecture:
        return config
    return deberta_v3_config(
        config.num_layers,
        config.hidden_size,
        config.num_heads,
        config.intermediate_size,
        vocabulary_size=config.vocabulary_size,
        max_sequence_length=config.max_sequence_length,
        initializer_range=config.initializer_range,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
    )


def build_pretrainer(encoder_config, dtype, options):
    discriminator, generator = deberta_v3_encoders(
        encoder_config,
        options["generator_depth"],
        EMBEDDING_SHARING[options["embedding_sharing"]],
        dtype=dtype,
    )
    loss = {name: options[name] for name in ("discriminator_weight", "temperature")}
    return DebertaV3Pretrainer(discriminator, generator, **loss)


RECIPE = register_recipe(
    Recipe(
        "deberta_v3",
        "replaced-token detection on DeBERTa encoders with gradient-disentangled embedding sharing (He et al. 2023)",
        OBJECTIVE,
        build_pretrainer,
        encoder_config=deberta_v3_sized_like,
        options={
            "generator_depth": Option(0.5, GENERATOR_DEPTH, "generator layers / discriminator's (same width)"),
            "embedding_sharing": Option(
                "gdes", Choice(tuple(EMBEDDING_SHARING)), "gdes: the discriminator reads sg(E_G) + E_Δ; es: E_G"
            ),
            # ELECTRA's loss weight and sampling temperature, and its reported metrics.
            **{name: ELECTRA.options[name] for name in ("discriminator_weight", "temperature")},
        },
        report=ELECTRA.report,
        continues_checkpoint=False,  # a generator and a discriminator
    )
)

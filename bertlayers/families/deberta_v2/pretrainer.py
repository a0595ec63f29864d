"""DeBERTa-v3's pretraining (He et al. 2023): ELECTRA's replaced-token detection over DeBERTa
encoders, a generator of the discriminator's width and half its depth, and the discriminator's token
table shared through gradient-disentangled embedding sharing (`embedding_sharing`).

    masked ids --generator (L/2 layers)--> MLM logits [B, P, V] --sample--> corrupted ids [B, S]
    corrupted ids --discriminator (L layers, table sg(E_G) + E_Δ)--> replaced logits [B, S]
    loss = MLM(generator) + λ · sigmoid-CE(replaced logits, labels) over real tokens
"""

import keras

from bertlayers.families.deberta_v2.embedding_sharing import SharedTableEmbeddings, folded
from bertlayers.families.deberta_v2.encoder import DebertaV2Encoder
from bertlayers.families.electra.pretrainer import ElectraPretrainer
from bertlayers.utils.validation import Range

GENERATOR_DEPTH = Range(float, 0, 1, low_open=True)
# The recipe's names for the two ways of sharing (the paper's: GDES, and ES as in ELECTRA).
EMBEDDING_SHARING = {"gdes": "disentangled", "es": "shared"}


def deberta_v3_encoders(config, generator_depth=0.5, sharing="disentangled", dtype=None, **settings):
    """(discriminator, generator) `DebertaV2Encoder`s of `config`: the generator as wide, with
    `generator_depth` of the layers (at least one); the discriminator's embeddings take their token
    table from the generator's (`SharedTableEmbeddings`, `sharing` "disentangled" or "shared").
    `settings` go to both encoders (position buckets, ...)."""
    generator_depth = GENERATOR_DEPTH.check("generator_depth", generator_depth)
    layers = max(1, round(config.num_layers * generator_depth))
    generator = DebertaV2Encoder.from_encoder_config(
        config.replace(num_layers=layers), dtype=dtype, name="generator", **settings
    )
    source = generator.embeddings
    embeddings = SharedTableEmbeddings.from_config(
        {**source.get_config(), "name": "embeddings", "source": source, "sharing": sharing}
    )
    discriminator = DebertaV2Encoder.from_encoder_config(
        config, embedding_layer=embeddings, dtype=dtype, name="encoder", **settings
    )
    return discriminator, generator


@keras.saving.register_keras_serializable(package="bertlayers")
class DebertaV3Pretrainer(ElectraPretrainer):
    """`ElectraPretrainer`'s replaced-token detection (its inputs, outputs, loss and logged metrics)
    over `deberta_v3_encoders`: the discriminator reads the generator's token table through its
    `SharedTableEmbeddings`. `finished_encoder()` is the discriminator with E_G + E_Δ folded into
    one table: what fine-tuning starts from."""

    def __init__(
        self, encoder, generator, discriminator_weight=50.0, temperature=1.0, name="deberta_v3_pretrainer", **kwargs
    ):
        super().__init__(encoder, generator, discriminator_weight, temperature, name=name, **kwargs)

    @staticmethod
    def _check_sharing(encoder, generator):
        if getattr(encoder.embeddings, "source", None) is not generator.embeddings:
            raise ValueError(
                "DebertaV3Pretrainer: the discriminator's embeddings must take their token table from the "
                "generator's (SharedTableEmbeddings(source=generator.embeddings); deberta_v3_encoders builds both)."
            )

    def finished_encoder(self):
        return folded(self.encoder)

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        generator = keras.saving.deserialize_keras_object(config.pop("generator"))
        encoder = config.pop("encoder")
        fields = dict(encoder["config"])
        # The saved discriminator's embeddings hold their own parts; the token table is the generator's again.
        saved = fields.pop("embedding_layer")
        embeddings = SharedTableEmbeddings.from_config({**saved["config"], "source": generator.embeddings})
        encoder_class = keras.saving.get_registered_object(encoder["registered_name"])
        encoder = encoder_class.from_config({**fields, "embedding_layer": embeddings})
        return cls(encoder, generator, **config)

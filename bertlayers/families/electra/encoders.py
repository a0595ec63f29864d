"""ELECTRA's two encoders: a discriminator and a smaller generator over one shared embedding layer."""

from bertlayers.families.bert.encoder import BertEncoder
from bertlayers.networks.encoder_base import embeddings_for
from bertlayers.utils.validation import Range

GENERATOR_FRACTION = Range(float, 0, 1, low_open=True)


def generator_config(config, generator_fraction=0.25):
    """The generator's `EncoderConfig` from the discriminator's: width a fraction of it,
    as many layers, FFN 4x its width, one head per 64 dimensions (at least one)."""
    generator_fraction = GENERATOR_FRACTION.check("generator_fraction", generator_fraction)
    width = max(1, int(round(config.hidden_size * generator_fraction)))
    heads = max(1, width // 64)
    while width % heads:
        heads -= 1
    return config.replace(hidden_size=width, num_heads=heads, intermediate_size=4 * width)


def electra_embeddings(config, dtype=None):
    """The embedding layer ELECTRA's encoders share: width `config.embedding_size`
    (default: the hidden size), no projection (each encoder adds its own)."""
    return embeddings_for(config, dtype)


def electra_encoder(config, embeddings, dtype=None, name="encoder"):
    """A `BertEncoder` of `config`'s block sizes over the (shared) `embeddings`."""
    fields = config.to_dict()
    for field in ("vocabulary_size", "max_sequence_length", "type_vocab_size", "embedding_size"):
        fields.pop(field)  # read from the embedding layer
    return BertEncoder(embedding_layer=embeddings, dtype=dtype, name=name, **fields)


def electra_encoders(config, generator_fraction=0.25, dtype=None):
    """(discriminator, generator) `BertEncoder`s sharing one embedding layer."""
    embeddings = electra_embeddings(config, dtype)
    return (
        electra_encoder(config, embeddings, dtype, "encoder"),
        electra_encoder(generator_config(config, generator_fraction), embeddings, dtype, "generator"),
    )


def two_stage_discriminator(generator, dtype=None):
    """Two-stage training's discriminator: a `BertEncoder` of `generator`'s sizes with its own
    embedding layer, starting as a copy of the trained `generator` (weights and embeddings)."""
    discriminator = electra_encoder(generator.config, electra_embeddings(generator.config, dtype), dtype, "encoder")
    discriminator.set_weights(generator.get_weights())
    return discriminator

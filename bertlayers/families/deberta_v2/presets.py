"""DeBERTa-v3's published sizes (`microsoft/deberta-v3-{xsmall,small,base,large}`,
`microsoft/mdeberta-v3-base`), as named presets (random weights)."""

from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.networks.presets import register_preset


def deberta_v3_config(num_layers, hidden_size, num_heads, intermediate_size, **fields):
    """DeBERTa-v3's architecture at a size: post-norm blocks with disentangled attention (the
    encoder's defaults: 256 position buckets, shared keys, a normalized table), no absolute
    positions or segments, 512 positions, LayerNorm epsilon 1e-7, GELU pooler, the 128,100-piece
    SentencePiece vocabulary."""
    arguments = dict(
        architecture="deberta_v2",
        vocabulary_size=128100,
        num_layers=num_layers,
        hidden_size=hidden_size,
        num_heads=num_heads,
        intermediate_size=intermediate_size,
        max_sequence_length=512,
        type_vocab_size=0,
        layer_norm_epsilon=1e-7,
        learned_positions=False,
        attention="disentangled",
        pooler_activation="gelu",
    )
    arguments.update(fields)
    return EncoderConfig(**arguments)


register_preset("deberta_v3_xsmall", deberta_v3_config(12, 384, 6, 1536))
register_preset("deberta_v3_small", deberta_v3_config(6, 768, 12, 3072))
register_preset("deberta_v3_base", deberta_v3_config(12, 768, 12, 3072))
register_preset("deberta_v3_large", deberta_v3_config(24, 1024, 16, 4096))
register_preset("mdeberta_v3_base", deberta_v3_config(12, 768, 12, 3072, vocabulary_size=251000))

"""ALBERT's encoder sizes from the paper, as named presets."""

from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.networks.presets import register_preset

# ALBERT (Lan et al. 2019, Table 1): E = 128, every layer shares one block, 30k SentencePiece vocabulary.
for _name, (_layers, _hidden, _heads) in {
    "albert_base": (12, 768, 12),
    "albert_large": (24, 1024, 16),
    "albert_xlarge": (24, 2048, 16),
    "albert_xxlarge": (12, 4096, 64),
}.items():
    register_preset(
        _name,
        EncoderConfig(
            architecture="albert",
            vocabulary_size=30000,
            num_layers=_layers,
            hidden_size=_hidden,
            num_heads=_heads,
            intermediate_size=4 * _hidden,
            embedding_size=128,
            num_layer_groups=1,
        ),
    )

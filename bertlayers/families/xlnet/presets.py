"""XLNet's encoder sizes from the paper, as named presets."""

from bertlayers.networks.encoder_config import EncoderConfig
from bertlayers.networks.presets import register_preset

# XLNet (Yang et al. 2019): post-LN relative-attention blocks, 32k SentencePiece vocabulary,
# segments 0, 1 and 2 ([CLS]); positions are relative, so the sequence limit is a choice.
for _name, (_layers, _hidden, _heads) in {"xlnet_base": (12, 768, 12), "xlnet_large": (24, 1024, 16)}.items():
    register_preset(
        _name,
        EncoderConfig(
            architecture="xlnet",
            vocabulary_size=32000,
            num_layers=_layers,
            hidden_size=_hidden,
            num_heads=_heads,
            intermediate_size=4 * _hidden,
            type_vocab_size=3,
        ),
    )

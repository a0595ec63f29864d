"""Named encoder configurations from the papers (architecture only; no weights)."""

from bertlayers.networks.encoder_config import EncoderConfig

_PRESETS = {}

# The 24 compact BERTs of Turc et al. 2019 ("Well-Read Students Learn Better"), named as
# Google released them: heads = H/64, intermediate = 4H.
for _layers in (2, 4, 6, 8, 10, 12):
    for _hidden in (128, 256, 512, 768):
        _PRESETS[f"bert_uncased_L-{_layers}_H-{_hidden}_A-{_hidden // 64}"] = EncoderConfig(
            num_layers=_layers,
            hidden_size=_hidden,
            num_heads=_hidden // 64,
            intermediate_size=4 * _hidden,
        )

_ALIASES = {
    "bert_tiny": "bert_uncased_L-2_H-128_A-2",
    "bert_mini": "bert_uncased_L-4_H-256_A-4",
    "bert_small": "bert_uncased_L-4_H-512_A-8",
    "bert_medium": "bert_uncased_L-8_H-512_A-8",
}

_PRESETS["bert_base"] = EncoderConfig()
_PRESETS["bert_large"] = EncoderConfig(
    num_layers=24, hidden_size=1024, num_heads=16, intermediate_size=4096
)

# ALBERT (Lan et al. 2019, Table 1): E = 128, every layer shares one block, 30k SentencePiece vocabulary.
for _name, (_layers, _hidden, _heads) in {
    "albert_base": (12, 768, 12),
    "albert_large": (24, 1024, 16),
    "albert_xlarge": (24, 2048, 16),
    "albert_xxlarge": (12, 4096, 64),
}.items():
    _PRESETS[_name] = EncoderConfig(
        architecture="albert",
        vocabulary_size=30000,
        num_layers=_layers,
        hidden_size=_hidden,
        num_heads=_heads,
        intermediate_size=4 * _hidden,
        embedding_size=128,
        num_layer_groups=1,
    )

def register_preset(name, config):
    """Add a named `EncoderConfig` (a family's module adds its presets on import)."""
    if name in _PRESETS or name in _ALIASES:
        raise ValueError(f"Preset {name!r} is already registered.")
    _PRESETS[name] = config


def preset_names():
    """Every known preset name, aliases included."""
    return sorted(_PRESETS) + sorted(_ALIASES)


def get_preset(name):
    """The EncoderConfig named `name`, or a ValueError listing the known names."""
    config = _PRESETS.get(_ALIASES.get(name, name))
    if config is None:
        raise ValueError(f"Unknown preset {name!r}. Known presets: {', '.join(preset_names())}.")
    return config

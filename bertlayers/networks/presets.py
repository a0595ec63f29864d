"""Named encoder configurations (architecture only; no weights): the registry each family's
`presets` module fills on import (`bertlayers.families.bert.presets`, ...)."""

from bertlayers.networks.encoder_config import EncoderConfig

_PRESETS = {}

_ALIASES = {}


def register_preset(name, config, alias_of=None):
    """Add a named `EncoderConfig` (a family's module adds its presets on import), or, with
    `alias_of`, another name for a registered preset."""
    if name in _PRESETS or name in _ALIASES:
        raise ValueError(f"Preset {name!r} is already registered.")
    if alias_of is not None:
        _ALIASES[name] = alias_of
    else:
        _PRESETS[name] = config


def preset_names() -> list[str]:
    """Every known preset name, aliases included."""
    return sorted(_PRESETS) + sorted(_ALIASES)


def get_preset(name: str) -> EncoderConfig:
    """The EncoderConfig named `name`, or a ValueError listing the known names."""
    config = _PRESETS.get(_ALIASES.get(name, name))
    if config is None:
        where = ""
        if "/" in name or name.startswith("hf://"):  # a Hub id or a path, as keras-hub's from_preset takes
            where = (
                " A preset is an architecture with random weights; pretrained weights load from a checkpoint "
                f"folder or Hub name: bertlayers.convert.load_checkpoint({name!r})."
            )
        raise ValueError(f"Unknown preset {name!r}.{where} Known presets: {', '.join(preset_names())}.")
    return config

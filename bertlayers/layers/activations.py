"""Activation functions selectable by name in configs and layers."""

import keras

_ACTIVATIONS = {
    # BERT's original GELU: exact, with erf.
    "gelu": lambda x: keras.activations.gelu(x, approximate=False),
    # The tanh approximation (Hugging Face's "gelu_new", GPT-2's and some ALBERT configs').
    "gelu_approximate": lambda x: keras.activations.gelu(x, approximate=True),
    "relu": keras.activations.relu,
    "silu": keras.activations.silu,
    "tanh": keras.activations.tanh,
}
# Names other libraries use for the same functions, so their configs load unchanged.
_ALIASES = {"gelu_new": "gelu_approximate", "gelu_pytorch_tanh": "gelu_approximate", "swish": "silu"}


def activation_names():
    return sorted(_ACTIVATIONS) + sorted(_ALIASES)


def canonical_activation(name):
    """The canonical name for `name`, or a ValueError listing the known ones."""
    name = _ALIASES.get(name, name)
    if name not in _ACTIVATIONS:
        raise ValueError(f"Unknown activation {name!r}; known activations: {', '.join(activation_names())}.")
    return name


def get_activation(name):
    return _ACTIVATIONS[canonical_activation(name)]


# How `activation` was spelled in configs saved before one name was used everywhere: files
# written then still load.
_OLD_ACTIVATION_KEYS = ("hidden_activation", "intermediate_activation", "inner_activation")


def with_activation_renamed(config):
    """A saved `config` dict with an older spelling of `activation` renamed to it."""
    config = dict(config)
    for key in _OLD_ACTIVATION_KEYS:
        if key in config:
            config["activation"] = config.pop(key)
    return config

"""Activation functions selectable by name in configs and layers."""

import keras
from keras import ops

_SQRT_HALF = 0.7071067811865476


def gelu(x):
    """BERT's original GELU, exact: x·Φ(x) = x · (1 + erf(x/√2)) / 2.

    Spelled term by term in the order TensorFlow's graph optimizer matches, so that after a
    2-D MatMul and bias it becomes one fused oneDNN kernel (Keras's gelu, written with erfc,
    stays five element-wise passes).
    """
    return ops.multiply(ops.multiply(ops.add(ops.erf(ops.multiply(x, _SQRT_HALF)), 1.0), 0.5), x)


_ACTIVATIONS = {
    "gelu": gelu,
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
        raise ValueError(
            f"Unknown activation {name!r}; known activations: {', '.join(activation_names())}."
        )
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

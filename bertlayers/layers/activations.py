"""Activation functions selectable by name in configs and layers."""

import keras

from bertlayers import backend

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


def activate(fn, x, training=None):
    """`fn(x)`. In training, where the backend is faster so (`backend.activations_in_float32`), a
    bfloat16 or float16 `x` goes through `fn` in float32 and comes back in its own dtype: the
    values are those of the float32 function rounded once."""
    low_precision = keras.backend.standardize_dtype(x.dtype) in ("bfloat16", "float16")
    if training and low_precision and backend.activations_in_float32():
        return keras.ops.cast(fn(keras.ops.cast(x, "float32")), x.dtype)
    return fn(x)

"""Weight initializers shared by the layers."""

import keras


def bert_initializer(stddev=0.02):
    """BERT's `initializer_range`: truncated normal with the given standard deviation."""
    return keras.initializers.TruncatedNormal(stddev=stddev)


def clone_initializer(initializer):
    """A fresh copy of `initializer` for one sub-layer.

    Sharing one initializer object between sub-layers is unsafe: a seeded initializer
    would give every weight the same values.
    """
    if isinstance(initializer, keras.initializers.Initializer):
        return initializer.__class__.from_config(initializer.get_config())
    return keras.initializers.get(initializer)

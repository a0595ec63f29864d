"""Layer classes named in a config: a Keras core layer by its class name, any other by the name it
is registered under (`"bertlayers>TransformerEncoderBlock"`, a user's `"my_package>MyNorm"`)."""

import keras


def registered_class(value, what):
    """The layer class `value` names (or `value` itself, a class); `what` names the argument in errors."""
    if isinstance(value, type):
        return value
    if isinstance(value, str):
        found = keras.saving.get_registered_object(value, module_objects=vars(keras.layers))
        if isinstance(found, type):
            return found
    raise ValueError(
        f"{what}: {value!r} is neither a layer class nor the name of one (a Keras layer's class name, or a "
        f"name registered with keras.saving.register_keras_serializable, as 'package>Name')."
    )


def registered_name(cls):
    """The name `registered_class` reads back: the registered name, or a Keras core layer's class name."""
    return keras.saving.get_registered_name(cls)

"""One shared check for every layer of the library (after keras-hub's `run_layer_test`).

`run_layer_test` checks, for one layer class and one set of inputs:
  1. the config round trip: `from_config(get_config())` gives the same config, and the config
     names every constructor argument;
  2. a symbolic call (functional API) and an eager call give the expected output shapes, and
     agree with each other;
  3. a layer rebuilt from the config with the same weights computes the same outputs;
  4. a `.keras` save and load with `safe_mode=True` computes the same outputs;
  5. one `fit` step runs, its loss is finite, and it changes the trainable weights (layers
     without weights, `trainable=False`: it has none);
  6. under `mixed_bfloat16` the forward pass is finite, the variables stay float32, the
     outputs have the expected dtype, and every sub-layer the layer made computes in the
     layer's policy (the policy is passed down).
"""

import inspect
import os
import tempfile

import keras
import numpy as np
from keras import ops, tree


def _input(array, name):
    return keras.Input(shape=array.shape[1:], dtype=str(array.dtype), name=name)


def _symbolic_inputs(inputs):
    """keras.Input tensors named after the call arguments (list entries get an index suffix)."""
    return {
        key: (
            [_input(a, f"{key}_{i}") for i, a in enumerate(value)]
            if isinstance(value, (list, tuple))
            else _input(value, key)
        )
        for key, value in inputs.items()
    }


def _is_shape(value):
    return isinstance(value, tuple) and all(d is None or isinstance(d, int) for d in value)


def _map_shapes(fn, shapes):
    """Apply `fn` to each shape tuple of a nested structure of shapes."""
    if _is_shape(shapes):
        return fn(shapes)
    return type(shapes)(_map_shapes(fn, s) for s in shapes)


def _shapes(outputs):
    if isinstance(outputs, (list, tuple)):
        return type(outputs)(_shapes(o) for o in outputs)
    return tuple(outputs.shape)


def _assert_close(actual, expected, atol, message):
    for a, e in zip(tree.flatten(actual), tree.flatten(expected)):
        np.testing.assert_allclose(
            ops.convert_to_numpy(a).astype("float32"),
            ops.convert_to_numpy(e).astype("float32"),
            atol=atol,
            err_msg=message,
        )


def _constructor_arguments(layer_cls):
    parameters = inspect.signature(layer_cls.__init__).parameters
    return {
        name for name, p in parameters.items() if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }


def run_layer_test(
    layer_cls,
    init_kwargs,
    inputs,
    expected_output_shape,
    mixed_output_dtype="bfloat16",
    call_kwargs=None,
    atol=1e-5,
    trainable=True,
    symbolic_output_shape=None,
):
    """Run checks 1-6 above.

    Args:
      layer_cls: the layer class.
      init_kwargs: constructor arguments.
      inputs: dict of tensor call arguments, numpy arrays (or lists of them), batch first.
      expected_output_shape: nested structure of shape tuples, as the layer returns them.
      mixed_output_dtype: dtype of the floating outputs under mixed_bfloat16 ("float32" for
        heads that return float32 logits).
      call_kwargs: non-tensor call arguments (flags).
      trainable: whether the layer has weights to train (masks and encodings have none).
      symbolic_output_shape: the functional call's output shapes, where an output's first
        axis is not the batch (default: `expected_output_shape` with the batch unknown).
    """
    call_kwargs = call_kwargs or {}
    # 1. Config round trip.
    layer = layer_cls(**init_kwargs)
    config = layer.get_config()
    revived = layer_cls.from_config(config)
    assert revived.get_config() == config
    missing = _constructor_arguments(layer_cls) - set(config)
    assert not missing, f"get_config lacks constructor arguments {sorted(missing)}"

    # 2. Symbolic and eager calls.
    symbolic_inputs = _symbolic_inputs(inputs)
    symbolic_outputs = layer(**symbolic_inputs, **call_kwargs)
    batch_free = symbolic_output_shape or _map_shapes(lambda shape: (None,) + shape[1:], expected_output_shape)
    assert _shapes(symbolic_outputs) == batch_free, _shapes(symbolic_outputs)
    model = keras.Model(symbolic_inputs, symbolic_outputs)
    eager_outputs = layer(**inputs, **call_kwargs)
    assert _shapes(eager_outputs) == expected_output_shape
    _assert_close(model(inputs), eager_outputs, atol, "functional and eager calls disagree")

    # 3. Rebuilt from config with the same weights.
    revived(**inputs, **call_kwargs)
    revived.set_weights(layer.get_weights())
    _assert_close(revived(**inputs, **call_kwargs), eager_outputs, atol, "layer rebuilt from config disagrees")

    # 4. .keras save and load, safe mode.
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "layer.keras")
        model.save(path)
        loaded = keras.saving.load_model(path, safe_mode=True)
    _assert_close(loaded(inputs), eager_outputs, atol, "model reloaded from .keras disagrees")

    # 5. One fit step on a scalar loss over every floating output.
    if not trainable:
        assert not layer.trainable_weights, "a layer declared without weights has some"
        return _mixed_precision_forward(layer_cls, init_kwargs, inputs, call_kwargs, mixed_output_dtype), eager_outputs
    floating = [t for t in tree.flatten(symbolic_outputs) if "float" in t.dtype]
    per_example = [ops.mean(ops.square(ops.cast(t, "float32")), axis=tuple(range(1, len(t.shape)))) for t in floating]
    loss_model = keras.Model(symbolic_inputs, ops.sum(ops.stack(per_example, axis=-1), axis=-1))
    loss_model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    before = [ops.convert_to_numpy(w) for w in layer.trainable_weights]
    assert before, "the layer has no trainable weights"
    batch_size = tree.flatten(inputs)[0].shape[0]
    history = loss_model.fit(inputs, np.zeros((batch_size,), "float32"), batch_size=batch_size, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    after = [ops.convert_to_numpy(w) for w in layer.trainable_weights]
    assert any(not np.array_equal(b, a) for b, a in zip(before, after)), "fit changed no weight"

    _mixed_precision_forward(layer_cls, init_kwargs, inputs, call_kwargs, mixed_output_dtype)
    return layer, eager_outputs


def _mixed_precision_forward(layer_cls, init_kwargs, inputs, call_kwargs, mixed_output_dtype):
    """6. Under mixed_bfloat16: finite outputs of the expected dtype, float32 variables, and the
    policy on every sub-layer the layer made (layers handed to it keep their own)."""
    given = {id(sub) for v in init_kwargs.values() if isinstance(v, keras.layers.Layer) for sub in v._flatten_layers()}
    mixed = layer_cls(**{**init_kwargs, "dtype": "mixed_bfloat16"})
    mixed_outputs = mixed(**inputs, **call_kwargs)
    assert all(v.dtype == "float32" for v in mixed.weights), "variables must stay float32"
    for output in tree.flatten(mixed_outputs):
        if "float" in str(output.dtype):
            assert keras.backend.standardize_dtype(output.dtype) == mixed_output_dtype, output.dtype
            assert np.all(np.isfinite(ops.convert_to_numpy(ops.cast(output, "float32"))))
    own = [sub for sub in mixed._flatten_layers(include_self=False) if id(sub) not in given]
    wrong = [f"{sub.name}: {sub.dtype_policy.name}" for sub in own if sub.dtype_policy.name != "mixed_bfloat16"]
    assert not wrong, f"sub-layers not given the layer's dtype policy: {wrong}"
    return mixed

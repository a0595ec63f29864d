"""The checks the library's own tests run, for your layers, encoders and task models too (after
keras-hub's `TestCase`): `run_layer_test`, `run_encoder_test`, `run_task_model_test` and
`check_served_equals_keras` (over `served_outputs`). Each raises an AssertionError saying what does not hold.

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

from bertlayers import backend


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
    if isinstance(shapes, dict):
        return {key: _map_shapes(fn, s) for key, s in shapes.items()}
    return type(shapes)(_map_shapes(fn, s) for s in shapes)


def _shapes(outputs):
    if isinstance(outputs, dict):
        return {key: _shapes(o) for key, o in outputs.items()}
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
    given = {
        id(sub) for v in init_kwargs.values() if isinstance(v, keras.layers.Layer) for sub in backend.flatten_layers(v)
    }
    mixed = layer_cls(**{**init_kwargs, "dtype": "mixed_bfloat16"})
    mixed_outputs = mixed(**inputs, **call_kwargs)
    assert all(v.dtype == "float32" for v in mixed.weights), "variables must stay float32"
    for output in tree.flatten(mixed_outputs):
        if "float" in str(output.dtype):
            assert keras.backend.standardize_dtype(output.dtype) == mixed_output_dtype, output.dtype
            assert np.all(np.isfinite(ops.convert_to_numpy(ops.cast(output, "float32"))))
    own = [sub for sub in backend.flatten_layers(mixed, include_self=False) if id(sub) not in given]
    wrong = [f"{sub.name}: {sub.dtype_policy.name}" for sub in own if sub.dtype_policy.name != "mixed_bfloat16"]
    assert not wrong, f"sub-layers not given the layer's dtype policy: {wrong}"
    return mixed


def encoder_batch(vocabulary_size, lengths=(7, 4, 2), sequence_length=8, seed=0):
    """A batch of right-padded rows of `lengths` real tokens: {token_ids, segment_ids, padding_mask}."""
    rng = np.random.default_rng(seed)
    mask = (np.arange(sequence_length)[None] < np.array(lengths)[:, None]).astype("int32")
    ids = rng.integers(1, vocabulary_size, (len(lengths), sequence_length)).astype("int32") * mask
    return {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": mask}


def run_encoder_test(encoder_class, init_kwargs, batch=None, atol=1e-5):
    """Check an encoder class (`EncoderBase`'s contract), on `batch` (default `encoder_batch`):

      1. the outputs: `sequence_output` `[B, S, H]`, `pooled_output` `[B, H]`, L `encoder_outputs`
         and the `embedding_output`, all finite;
      2. more padding after a row changes none of its real tokens' outputs, nor the pooled output;
      3. the config round trip: rebuilt from `get_config()` with the same weights, the same outputs;
      4. a `.keras` save and load (safe mode) computes the same outputs;
      5. the rows computed alone (`sequence_output_at`) equal the full output's rows;
      6. one `fit` step on the pooled output changes the weights.

    Returns the encoder and its outputs on `batch`.
    """
    encoder = encoder_class(**init_kwargs)
    config = encoder.config
    batch = batch if batch is not None else encoder_batch(config.vocabulary_size)
    outputs = encoder(batch, training=False)
    batch_size, length = batch["token_ids"].shape
    hidden = config.hidden_size
    assert tuple(outputs["sequence_output"].shape) == (batch_size, length, hidden), outputs["sequence_output"].shape
    assert tuple(outputs["pooled_output"].shape) == (batch_size, hidden), outputs["pooled_output"].shape
    assert len(outputs["encoder_outputs"]) == config.num_layers, "one encoder output per layer"
    assert tuple(outputs["embedding_output"].shape) == (batch_size, length, hidden)
    for key in ("sequence_output", "pooled_output"):
        assert np.all(np.isfinite(ops.convert_to_numpy(outputs[key]))), f"{key} is not finite"

    real = batch["padding_mask"].astype(bool)
    padded = {key: np.pad(value, ((0, 0), (0, 3))) for key, value in batch.items()}
    if not encoder.reads_first_token:  # an encoder reading its last token pads on the left
        padded = {key: np.pad(value, ((0, 0), (3, 0))) for key, value in batch.items()}
    more = encoder(padded, training=False)
    sequence = ops.convert_to_numpy(outputs["sequence_output"])
    longer = ops.convert_to_numpy(more["sequence_output"])
    longer = longer[:, :length] if encoder.reads_first_token else longer[:, 3:]
    _assert_close(longer[real], sequence[real], atol, "more padding changed the real tokens' outputs")
    _assert_close(more["pooled_output"], outputs["pooled_output"], atol, "more padding changed the pooled output")

    revived = encoder_class.from_config(encoder.get_config())
    revived.set_weights(encoder.get_weights())
    _assert_close(revived(batch, training=False), outputs, atol, "the encoder rebuilt from its config disagrees")
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "encoder.keras")
        encoder.save(path)
        loaded = keras.saving.load_model(path, safe_mode=True)
    _assert_close(loaded(batch, training=False), outputs, atol, "the encoder reloaded from .keras disagrees")

    positions = np.stack([np.arange(2)] * batch_size).astype("int32")
    rows = encoder.sequence_output_at(outputs, positions, batch["padding_mask"])
    _assert_close(rows, sequence[:, :2], atol, "the rows computed alone disagree with the full output")

    inputs = {
        name: keras.Input((None,), dtype="int32", name=name) for name in ("token_ids", "segment_ids", "padding_mask")
    }
    head = keras.Model(inputs, keras.layers.Dense(1)(encoder(inputs)["pooled_output"]))
    _fits(head, batch, np.zeros((batch_size, 1), "float32"), encoder.trainable_weights)
    return encoder, outputs


def run_task_model_test(model, batch, labels, loss=None, atol=1e-5):
    """Check a task model on `batch` and `labels`: finite predictions; one `fit` step (with `loss`,
    or the model's own `compile` defaults) changes its weights; a `.keras` save and load predicts
    the same. Returns the predictions after training."""
    before = model.predict(batch, verbose=0)
    for value in tree.flatten(before):
        assert np.all(np.isfinite(np.asarray(value, "float32"))), "a prediction is not finite"
    if not model.compiled:
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=loss)
    _fits(model, batch, labels, model.trainable_weights, compiled=True)
    trained = model.predict(batch, verbose=0)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.keras")
        model.save(path)
        loaded = keras.saving.load_model(path, safe_mode=True)
    _assert_close(loaded.predict(batch, verbose=0), trained, atol, "the model reloaded from .keras predicts otherwise")
    return trained


def served_outputs(model, batch, **export_settings):
    """Export `model`'s ids SavedModel (TensorFlow), load it, and answer `batch` (the inputs its
    `serving_default` takes, by name) with it: {served output: NumPy array}."""
    import tensorflow as tf

    from bertlayers.export import export_for_serving

    with tempfile.TemporaryDirectory() as directory:
        paths = export_for_serving(model, "checked", base_dir=directory, text=False, **export_settings)
        signature = tf.saved_model.load(paths["checked"]).signatures["serving_default"]
        names = list(signature.structured_input_signature[1])
        return {key: value.numpy() for key, value in signature(**{n: tf.constant(batch[n]) for n in names}).items()}


def check_served_equals_keras(model, batch, atol=1e-4, **export_settings):
    """Export `model`'s ids SavedModel (TensorFlow), load it, and check that its `serving_default`
    answers `batch` as the Keras model does, for every served output the model computes itself.
    Returns the served outputs."""
    from bertlayers.export.serving_outputs import ID_INPUTS, model_input_names

    served = served_outputs(model, batch, **export_settings)
    names = [name for name in model_input_names(model) if name in ID_INPUTS]  # what the signature feeds it
    computed = model({n: batch[n] for n in names}, training=False)
    computed = computed if isinstance(computed, dict) else {"output": computed}
    shared = sorted(set(served) & set(computed))
    assert shared, f"no served output ({sorted(served)}) is one of the model's ({sorted(computed)})"
    for key in shared:
        if hasattr(computed[key], "shape"):
            _assert_close(served[key], computed[key], atol, f"served {key!r} differs from the Keras model's")
    return served


def _fits(model, x, y, weights, compiled=False):
    """One `fit` step moves `weights` and gives a finite loss."""
    if not compiled:
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    before = [ops.convert_to_numpy(w) for w in weights]
    assert before, "nothing to train"
    history = model.fit(x, y, batch_size=len(y), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0]), "the loss is not finite"
    after = [ops.convert_to_numpy(w) for w in weights]
    assert any(not np.array_equal(b, a) for b, a in zip(before, after)), "fit changed no weight"

"""The Keras backend in one place: what each backend can do, and every Keras internal we use.

The model code is one `keras.ops` implementation for every backend; where a backend can do more
(or must be met halfway), the code asks a named capability here instead of testing the
backend's name. Every private Keras name the library reads, calls or overrides is listed in
`KERAS_INTERNALS` with where and why, checked against `KERAS_CHECKED`:
`tests/test_keras_internals.py` fails when Keras changes under any of them (or its version
changes, so that each is looked at again).

It sits below every tier beside `bertlayers.startup` and imports nothing else of ours.
"""

import functools
import gc
import sys
from typing import Protocol

import keras


class TensorLike(Protocol):
    """What `keras.ops` takes and gives, in the public signatures: a tensor of the running backend
    (`tf.Tensor`, `jax.Array`), a NumPy array, or a symbolic `keras.KerasTensor` while a functional
    model is built; anything with a shape and a dtype."""

    shape: tuple
    dtype: object


# The Keras release every internal below was read against.
KERAS_CHECKED = "3.15.1"

# (owner, name, used in, why). An owner is a class or module path; a name on an instance only
# (a functional model's input structure) is checked on one built in the test.
KERAS_INTERNALS = (
    (
        "keras.Model",
        "_flatten_layers",
        "networks/input_limits.py, convert/model_files.py",
        "every sublayer of a model, nested models included (Keras has no public walk)",
    ),
    (
        "keras.Model",
        "_aggregate_additional_loss",
        "models/encoder_model.py",
        "a layer's added loss reduced as Keras reduces it, for a model that computes its own loss",
    ),
    (
        "keras.Model",
        "_symbolic_build",
        "networks/guarded_model.py, training/distribute.py",
        "overridden: Keras's build from a symbolic batch is not the user's input; called by the multi-worker patch",
    ),
    (
        "keras.Model",
        "_inputs_struct@functional",
        "export/serving_outputs.py",
        "a functional model's inputs by name, as it was built",
    ),
    (
        "keras.optimizers.Optimizer",
        "_clip_gradients",
        "training/optimization.py",
        "overridden: gradients summed across replicas before clipping; TensorFlow's one-pass global norm",
    ),
    (
        "keras.optimizers.Optimizer",
        "_apply_weight_decay",
        "training/optimization.py",
        "overridden: the decay's rate made once a step, not the schedule again for every variable",
    ),
    (
        "keras.optimizers.Optimizer",
        "_use_weight_decay",
        "training/optimization.py",
        "whether a variable is decayed (its exclusions), as Keras decides it",
    ),
    (
        "keras.optimizers.Optimizer",
        "_distribution_strategy@instance",
        "training/optimization.py",
        "the strategy Keras's own weight decay merges its updates under (TensorFlow)",
    ),
    (
        "keras.layers.Dense",
        "_kernel@built",
        "backend.py",
        "the kernel a LoRA layer stores without its adapters, folded into and restored (fold_lora)",
    ),
    (
        "keras.layers.Layer",
        "__delattr__",
        "backend.py",
        "a full gc.collect for every variable a layer drops (quantize drops each kernel): one for all (quantize)",
    ),
    (
        "keras.layers.Layer",
        "_untrack_variable",
        "backend.py",
        "a folded layer's adapters out of its weights, so a copy, save or export sees the plain layer",
    ),
    (
        "keras.layers.Layer",
        "_track_variable",
        "backend.py",
        "the adapters back in the layer's weights after a fold is undone",
    ),
    (
        "keras.optimizers.Optimizer",
        "_all_reduce_sum_gradients",
        "training/optimization.py",
        "overridden: skipped where the gradients were summed before clipping",
    ),
    (
        "keras.optimizers.Optimizer",
        "_get_variable_index",
        "training/optimization.py",
        "the slot of a variable's Adam moments, for the fused step",
    ),
    (
        "keras.optimizers.Adam",
        "_momentums@instance",
        "training/optimization.py",
        "Adam's first moments, for the fused step",
    ),
    (
        "keras.optimizers.Adam",
        "_velocities@instance",
        "training/optimization.py",
        "Adam's second moments, for the fused step",
    ),
    (
        "keras.src.backend.tensorflow.trainer.TensorFlowTrainer",
        "_maybe_symbolic_build",
        "training/distribute.py",
        "patched: a multi-worker strategy's first batch is not reduced across workers to build the model",
    ),
    (
        "keras.src.backend.tensorflow.trainer",
        "reduce_per_replica",
        "training/distribute.py",
        "patched: scalar logs reduced across workers with axis=None (tensorflow#72388)",
    ),
    (
        "keras.src.backend.tensorflow.trainer",
        "_collective_all_reduce_multi_worker",
        "training/distribute.py",
        "whether a strategy spans workers, as Keras decides it",
    ),
    (
        "keras.src.backend.jax.trainer.JAXTrainer",
        "_purge_model_variables",
        "networks/guarded_model.py",
        "overridden: the values Keras clears before a JAX loop, kept to put back if a step fails",
    ),
    (
        "keras.src.backend.jax.trainer.JAXTrainer",
        "jax_state_sync",
        "networks/guarded_model.py",
        "the loop's last state written back to the variables after a failed step",
    ),
    (
        "keras.src.backend.jax.trainer.JAXTrainer",
        "_jax_state@runtime",
        "networks/guarded_model.py",
        "the state a JAX loop holds (set while it runs; tests/test_refused_calls.py exercises it)",
    ),
    (
        "keras.src.backend.jax.distribution_lib",
        "distribute_data_input",
        "training/sharding.py",
        "patched: a batch the devices do not divide is placed whole on each (a run's last partial batch)",
    ),
    (
        "keras.Variable",
        "_value@variable",
        "networks/guarded_model.py, backend.py",
        "a variable's value as stored (what a JAX loop clears; read without the property's per-read work)",
    ),
    (
        "keras.src.losses.loss",
        "scale_loss_for_distribution",
        "families/electra/pretrainer.py",
        "a loss scaled as Keras scales it across replicas, for a model adding two losses",
    ),
)


def _resolve(path):
    """The class or module at a dotted `path` (the longest importable module, then attributes)."""
    import importlib

    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            target = getattr(target, name)
        return target
    raise ImportError(f"cannot import {path}")


def internal(owner, name):
    """The Keras internal `owner.name` listed in `KERAS_INTERNALS` (refused if not listed there)."""
    if not any(entry[0] == owner and entry[1].split("@")[0] == name for entry in KERAS_INTERNALS):
        raise KeyError(f"{owner}.{name} is not a listed Keras internal (bertlayers.backend.KERAS_INTERNALS).")
    return getattr(_resolve(owner), name)


# --- The internals, by what they do ---


def flatten_layers(model, include_self=True, recursive=True):
    """Every layer of `model` (nested models' layers too, with `recursive`)."""
    return model._flatten_layers(include_self=include_self, recursive=recursive)


def input_structure(model):
    """A functional model's inputs as it was built (a dict by name, a list...), or None."""
    return getattr(model, "_inputs_struct", None)


def additional_loss(model, loss):
    """A loss a layer added, reduced as Keras reduces it into the training loss."""
    return model._aggregate_additional_loss(loss)


def scale_loss_for_distribution(loss):
    """`loss` scaled as Keras scales a loss across the replicas of a strategy."""
    return internal("keras.src.losses.loss", "scale_loss_for_distribution")(loss)


def tensorflow_trainer_module():
    """Keras's TensorFlow trainer module (patched by `bertlayers.training.distribute`)."""
    return _resolve("keras.src.backend.tensorflow.trainer")


def variable_values(variables):
    """The values of `variables` as stored: what `variable.value` returns outside a layer's call
    (no autocast scope there), without its per-read work (a predictor reads every weight at
    every call; `benchmarks/host_overhead.py` measures it). A value a JAX loop has cleared is read through the property."""
    values = [variable._value for variable in variables]
    if any(value is None for value in values):
        return [variable.value for variable in variables]
    return values


def build_optimizer_ahead(model):
    """Build `model`'s optimizer for its trainable variables before Keras traces a train step.

    Keras's TensorFlow trainer, without a strategy, defers the build into the first traced step;
    the variables created there make TensorFlow trace the step a second time (about half of a
    small model's first `fit`). Keras's other paths (a strategy, JAX) build it ahead as here."""
    optimizer = getattr(model, "optimizer", None)
    if name() != "tensorflow" or optimizer is None or optimizer.built or not model.built:
        return
    with model.distribute_strategy.scope():
        optimizer.build(model.trainable_variables)


def jax_distribution_module():
    """Keras's JAX distribution module (patched by `bertlayers.training.sharding`)."""
    return _resolve("keras.src.backend.jax.distribution_lib")


# --- Capabilities ---


def name():
    """Keras's backend: "tensorflow", "jax", ..."""
    return keras.backend.backend()


def tensorflow():
    """TensorFlow where Keras runs on it (its graphs, tf.distribute, raw ops), else None."""
    return sys.modules.get("tensorflow") if name() == "tensorflow" else None


def length_multiple():
    """What a batch's length is rounded up to where batches are cut to their longest.
    TensorFlow traces a step once for any length: 1, the exact longest. JAX compiles a step for
    every shape it meets: multiples of 16 bound the shapes (4 up to 64 tokens, 8 up to 128)."""
    return 16 if name() == "jax" else 1


def skips_padding_rows():
    """Whether the position-wise half of a block may run on the real tokens' rows alone:
    TensorFlow's graphs take dynamic shapes (a gather of the real rows, a scatter back); JAX's
    compiled steps need static shapes, so there every row is computed and the padding zeroed
    (the padding is cut before the model instead, by length-bucketed batches)."""
    return name() == "tensorflow"


def nonzero_indices(vector):
    """The int32 indices of a 1-D tensor's nonzero entries. Under TensorFlow one `Where` and a
    reshape (`ops.nonzero` unstacks int64 index columns, which TFLite has no kernel for)."""
    tf = tensorflow()
    if tf is not None:
        return tf.cast(tf.reshape(tf.where(tf.not_equal(vector, 0)), [-1]), tf.int32)
    return keras.ops.cast(keras.ops.nonzero(vector)[0], "int32")


def fuses_attention(return_attention_scores, dropout_active, training=False, lengths=(None, None)):
    """Whether attention calls the backend's fused kernel (`ops.dot_product_attention`: cuDNN's
    flash attention on a GPU where JAX has it, one XLA fusion elsewhere). Under JAX only:
    TensorFlow's form is the same einsums, which its graph optimizer already fuses. Not when
    the probabilities are asked for, nor under attention dropout, which the kernels do not apply,
    nor in training with an odd query or key length (`lengths`): cuDNN's masked kernel has no
    gradient there (a classifier's last layer computes the [CLS] query alone), and JAX would log
    a traceback at every trace before falling back to the same XLA form as ours."""
    if name() != "jax" or return_attention_scores or dropout_active:
        return False
    return not (training and any(length is not None and length % 2 for length in lengths))


def enable_cross_process_collectives():
    """Let JAX's CPU devices take part in collectives across processes (gloo; without it a
    multi-process run on CPUs fails at its first reduction). GPUs use NCCL regardless. Keras's
    distribution API is JAX's: under another backend this raises, naming TensorFlow's strategies."""
    if name() != "jax":
        raise RuntimeError(
            f"Keras's multi-process distribution runs under KERAS_BACKEND=jax (this is {name()!r}); under "
            "TensorFlow use --strategy multi_worker (bertlayers.training.build_strategy)."
        )
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")


def process_index_and_count():
    """(this process's index, the processes) of a multi-process JAX run; (0, 1) otherwise (under
    TensorFlow, tf.distribute shards the data itself)."""
    if name() != "jax":
        return 0, 1
    import jax

    return jax.process_index(), jax.process_count()


def split_host_devices(count):
    """Let JAX see the host CPU as `count` devices (data parallelism tried without accelerators,
    as TensorFlow's logical CPUs are); before JAX starts its backends, or a RuntimeError."""
    if name() != "jax":
        raise RuntimeError(f"split_host_devices splits JAX's host CPU; the backend is {name()!r}.")
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", int(count))
    except RuntimeError as error:
        raise RuntimeError(
            f"Cannot split the CPU into {count} JAX devices: JAX has already started ({error}). Set the "
            "distribution before any model is built or op runs."
        ) from None


def graph_assertions():
    """TensorFlow, whose graphs take assertions on data (a bad id inside `tf.function` is an
    error naming it), else None (JAX's compiled steps cannot raise on values)."""
    return tensorflow()


def activations_in_float32():
    """Whether training computes a bfloat16 or float16 model's activations (GELU, SiLU, ...) in
    float32, cast up before and back after: TensorFlow on the CPU, whose low-precision
    element-wise kernels are slower than its float32 ones (GELU's forward and backward on a
    fine-tuning batch: `benchmarks/matmul_dtypes.py --activations`, figures in
    `benchmarks/analysis.md`).
    Not in inference, where TensorFlow fuses the activation into the product before it (MatMul +
    BiasAdd + GELU: one oneDNN kernel), which the casts would split; not under JAX, whose compiled
    steps fuse the element-wise ops (and casts) into their neighbours; not on a GPU, where it was
    not measured."""
    return tensorflow() is not None and not _tensorflow_gpus()


@functools.cache
def _tensorflow_gpus():
    """TensorFlow's GPUs, listed once (asked at every trace of an activation)."""
    return tuple(tensorflow().config.list_logical_devices("GPU"))


def random_states(model):
    """The state variables of `model`'s random generators (its dropout layers' seed generators), in
    the model's variable order: what `model.weights`, and so a weights file, leaves out."""
    weights = {id(variable) for variable in model.weights}
    return [v for v in model.variables if id(v) not in weights and v.path.endswith("seed_generator_state")]


def fused_adam_step(variable):
    """Whether Adam's update of `variable` may be TensorFlow's one-pass `ResourceApplyAdam`
    (float32 variables under TensorFlow) instead of Keras's ten element-wise passes."""
    return name() == "tensorflow" and keras.backend.standardize_dtype(variable.dtype) == "float32"


def restores_state_after_failed_step():
    """Whether a step that raises leaves the variables' values outside them: JAX's loops hold
    the state in the step (and clear the variables first), so it must be put back."""
    return name() == "jax"


def symbolic_sizes_share_symbols():
    """Whether a functional model's shape inference gives every unknown size one symbol (JAX),
    so that sizes which differ in a real call may read as equal while a model is built."""
    return name() == "jax"


def known_values(tensor):
    """`tensor` as a NumPy array if its values are known now, else None (symbolic, or traced).
    A JAX batch that spans several processes' devices gives this process's rows: what it fed."""
    import numpy as np

    if isinstance(tensor, keras.KerasTensor):
        return None
    if isinstance(tensor, np.ndarray):
        return tensor
    if name() == "tensorflow":
        return np.asarray(tensor) if sys.modules["tensorflow"].executing_eagerly() else None
    if name() == "jax":
        import jax

        if isinstance(tensor, jax.core.Tracer):
            return None
        if isinstance(tensor, jax.Array) and not tensor.is_fully_addressable:
            return _local_rows(tensor)
        return np.asarray(tensor)
    return keras.ops.convert_to_numpy(tensor)


def global_batch(data):
    """This process's rows of a batch (a structure of NumPy arrays) placed as Keras's JAX trainer
    places a batch (its `_distribute_data`): under a distribution over several processes' devices,
    in the global arrays that every process's rows make, split over the batch axis."""
    return _resolve("keras.src.backend.jax.trainer")._distribute_data(data)


def host_array(value):
    """`value` as a NumPy array: all of it, where it is a JAX array spread over several processes'
    devices (gathered from every process: each calls this for the same array)."""
    import numpy as np

    if name() == "jax":
        import jax

        if isinstance(value, jax.Array) and not value.is_fully_addressable:
            if value.is_fully_replicated:
                return np.asarray(value.addressable_data(0))
            from jax.experimental import multihost_utils

            return np.asarray(multihost_utils.process_allgather(value, tiled=True))
    return np.asarray(value)


def _local_rows(array):
    """The rows of a JAX `array` split over the batch axis across processes that this process's
    devices hold, in order (a row block held by several local devices taken once)."""
    import numpy as np

    blocks = {}
    for shard in array.addressable_shards:
        rows = shard.index[0] if shard.index else slice(None)
        blocks.setdefault((rows.start or 0, rows.stop), shard.data)
    return np.concatenate([np.asarray(blocks[key]) for key in sorted(blocks, key=lambda k: k[0])], axis=0)


def categorical(logits, seed):
    """One sample per row of `logits` `[rows, V]` (int32 `[rows, 1]`), drawn with a tensor seed
    (int `[2]`): the same seed, the same draw. `keras.random` takes no tensor seed under
    TensorFlow, whose stateless sampler does; JAX's takes it as the raw key (uint32 [2])."""
    tf = tensorflow()
    if tf is not None:
        return tf.random.stateless_categorical(logits, 1, seed=keras.ops.cast(seed, "int64"), dtype=tf.int32)
    return keras.random.categorical(logits, 1, dtype="int32", seed=keras.ops.cast(seed, "uint32"))


def rows_at(sequence, positions):
    """`sequence` `[batch, seq, ...]` at `positions` `[batch, P]` (non-negative): `[batch, P, ...]`.

    Under TensorFlow one batched `Gather`; Keras's `take_along_axis` there broadcasts the index
    to the rows' shape first, about fifty ops a call in every traced step (and as many in its
    gradient). Elsewhere, and on a functional model's symbolic tensors, `take_along_axis` (which
    JAX lowers to one gather)."""
    tf = tensorflow()
    if tf is not None and not any(isinstance(t, keras.KerasTensor) for t in (sequence, positions)):
        return tf.gather(sequence, positions, axis=1, batch_dims=1)
    index = positions
    for _ in range(len(sequence.shape) - 2):
        index = keras.ops.expand_dims(index, -1)
    return keras.ops.take_along_axis(sequence, index, axis=1)


# Keras 3.15 gives `Dense` / `EinsumDense` LoRA adapters (`enable_lora`) but no way to fold them
# into the kernel and back; its saving folds them by reading the `kernel` property (at the
# compute dtype). These reach its stored kernel and its switch.
def stored_kernel(layer):
    """The kernel `layer` stores, without its adapters."""
    return layer._kernel


def forget_traced_steps(model):
    """Drop the train, test and predict steps Keras traced for `model` (and the models inside
    it): they would run on with what they traced, such as adapters since folded. Returns what was
    dropped, for `restore_traced_steps`."""
    dropped = []
    for inner in flatten_layers(model):
        if isinstance(inner, keras.Model):
            dropped.append((inner, inner.train_function, inner.test_function, inner.predict_function))
            inner.train_function = inner.test_function = inner.predict_function = None
    return dropped


def restore_traced_steps(dropped):
    """Put back the steps `forget_traced_steps` dropped (a loop running them reads them again)."""
    for inner, train, test, predict in dropped:
        inner.train_function, inner.test_function, inner.predict_function = train, test, predict


def fold_lora(layer, delta):
    """Add `delta` (float32, the kernel's shape) to `layer`'s stored kernel and turn its adapters
    off; they leave the layer's weights (a copy, a save or an export sees the plain layer)."""
    layer._kernel.assign(keras.ops.cast(keras.ops.cast(layer._kernel, "float32") + delta, layer._kernel.dtype))
    layer.lora_enabled, layer.lora_rank = False, None
    for variable in (layer.lora_kernel_a, layer.lora_kernel_b):
        layer._untrack_variable(variable)


def unfold_lora(layer, kernel, rank):
    """Undo `fold_lora`: `kernel` stored again, the adapters of rank `rank` back in the layer's
    weights (last, where `enable_lora` put them) and on."""
    layer._kernel.assign(kernel)
    layer.lora_enabled, layer.lora_rank = True, rank
    locked = layer._tracker.locked
    layer._tracker.unlock()  # as `enable_lora` does to add them
    for variable in (layer.lora_kernel_a, layer.lora_kernel_b):
        layer._track_variable(variable)
    if locked:
        layer._tracker.lock()


def quantize(model, mode):
    """`model.quantize(mode)` with one garbage collection instead of one a variable: Keras's
    `Layer.__delattr__` runs a full `gc.collect` for every variable it drops (each kernel replaced
    by its int8 one), a walk of every object the process holds, 0.2-0.5 s each in a process that has
    loaded TensorFlow and built models; a BERT-base drops 97."""
    collect = gc.collect
    gc.collect = lambda generation=2: 0
    try:
        model.quantize(mode)
    finally:
        gc.collect = collect
    gc.collect()

"""Keras's distribution API for bertlayers' models under JAX: data parallelism across processes
and model parallelism by a layout of the attention and feed-forward kernels.

- Several processes (machines, or several per machine): `initialize_processes` joins them, then
  `keras.distribution.DataParallel(auto_shard_dataset=False)` (or `model_parallel`) spans every
  process's devices, and each process feeds its share of every global batch (`process_rows`
  for arrays, `process_share` for a batched dataset). `multi_process_data_parallel` does the
  joining from Keras's KERAS_DISTRIBUTION_* variables (the runners' `--strategy multi_worker`).
- Model parallelism: `model_parallel(model_devices)` lays the devices out as a `batch` x `model`
  mesh and shards each block's query/key/value and output projections over the heads and the
  feed-forward kernels over their inner width (`bertlayers.networks.weight_layout`); everything
  else is replicated.

Set the distribution before the model is built: Keras places each variable when it is created.
TensorFlow's strategies (`--strategy mirrored|multi_worker|tpu`) are `bertlayers.training.distribute`.
"""

import os
from collections.abc import Iterable

import keras
import numpy as np

from bertlayers import backend
from bertlayers.networks.weight_layout import MODEL_AXIS, model_parallel_axes, model_parallel_rules

BATCH_AXIS = "batch"


def layout_map(device_mesh: "keras.distribution.DeviceMesh") -> "keras.distribution.LayoutMap":
    """A `LayoutMap` of the registered rules on `device_mesh` (which has a `MODEL_AXIS` axis)."""
    if MODEL_AXIS not in device_mesh.axis_names:
        raise ValueError(f"The device mesh needs a {MODEL_AXIS!r} axis, got {device_mesh.axis_names}.")
    layouts = keras.distribution.LayoutMap(device_mesh)
    for pattern, axes in model_parallel_rules().items():
        layouts[pattern] = axes
    return layouts


def model_parallel(model_devices: int = 2, devices: list | None = None) -> "keras.distribution.ModelParallel":
    """The `ModelParallel` distribution over `devices` (default: every device of every process)
    as a `batch` x `model` mesh with `model_devices` along `model`; the batch is split over the
    rest. Check a model against it with `check_model_parallel` before training."""
    devices = list(devices) if devices is not None else keras.distribution.list_devices()
    if model_devices < 1 or len(devices) % model_devices:
        raise ValueError(f"model_devices={model_devices} must divide the {len(devices)} devices.")
    mesh = keras.distribution.DeviceMesh(
        (len(devices) // model_devices, model_devices), axis_names=(BATCH_AXIS, MODEL_AXIS), devices=devices
    )
    return keras.distribution.ModelParallel(layout_map=layout_map(mesh), batch_dim_name=BATCH_AXIS)


def check_model_parallel(model: keras.Model, model_devices: int) -> list:
    """The paths of `model`'s variables that the rules shard; a ValueError naming the first whose
    sharded dimension `model_devices` does not divide (its heads or inner width)."""
    sharded = []
    for variable in model.variables:
        axes = model_parallel_axes(variable.path)
        if axes is None:
            continue
        for size, axis in zip(variable.shape, axes):
            if axis == MODEL_AXIS and size % model_devices:
                raise ValueError(
                    f"{variable.path} (shape {tuple(variable.shape)}) cannot be split over "
                    f"{model_devices} model devices: {size} is not a multiple."
                )
        sharded.append(variable.path)
    return sharded


def local_data_parallel(num_cpu_devices: int | None = None) -> "keras.distribution.DataParallel":
    """Keras's `DataParallel` over the devices of one process (its GPUs or TPU cores; or, without
    them, the host CPU split into `num_cpu_devices`): what the runners' `--strategy mirrored`
    is under JAX (across processes: `initialize_processes`, then `DataParallel` and `process_rows`). Every batch is split over the devices; one they do not divide (a run's last,
    partial batch) is placed whole on each device, which all compute it in full: the same
    result, where Keras alone would fail on it."""
    if num_cpu_devices and num_cpu_devices > 1:
        backend.split_host_devices(num_cpu_devices)
    _place_uneven_batches_whole()
    return keras.distribution.DataParallel(devices=keras.distribution.list_devices())


def _place_uneven_batches_whole():
    """Patch Keras's placement of input batches (once per process): a batch whose rows the
    batch axis's devices do not divide is replicated instead of split (one process only: across
    processes each holds only its own rows)."""
    import jax

    module = backend.jax_distribution_module()
    original = module.distribute_data_input
    if getattr(original, "places_uneven_batches_whole", False):
        return

    def distribute_data_input(per_process_batch, layout, batch_dim_name):
        sharding = getattr(layout, "backend_layout", layout)
        mesh = getattr(sharding, "mesh", None)
        shape = getattr(per_process_batch, "shape", ())
        if (
            jax.process_count() == 1
            and mesh is not None
            and batch_dim_name in mesh.shape
            and len(shape)
            and shape[0] % mesh.shape[batch_dim_name]
        ):
            sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        return original(per_process_batch, sharding, batch_dim_name)

    distribute_data_input.places_uneven_batches_whole = True
    module.distribute_data_input = distribute_data_input


# Keras's variables for joining processes (`keras.distribution.initialize` reads them too).
PROCESS_VARIABLES = (
    "KERAS_DISTRIBUTION_JOB_ADDRESSES",
    "KERAS_DISTRIBUTION_NUM_PROCESSES",
    "KERAS_DISTRIBUTION_PROCESS_ID",
)


def processes_from_environment(environ: dict | None = None) -> tuple[str, int, int] | None:
    """(coordinator address, processes, this process's id) from Keras's variables
    `KERAS_DISTRIBUTION_JOB_ADDRESSES` (comma-separated "host:port"s, process 0's first: the
    coordinator), `KERAS_DISTRIBUTION_NUM_PROCESSES` and `KERAS_DISTRIBUTION_PROCESS_ID`; None
    where none is set; a ValueError naming the variable that is missing or malformed."""
    environ = os.environ if environ is None else environ
    values = {name: environ.get(name, "").strip() for name in PROCESS_VARIABLES}
    if not any(values.values()):
        return None
    missing = [name for name, value in values.items() if not value]
    if missing:
        raise ValueError(f"Joining processes needs {', '.join(PROCESS_VARIABLES)}; {', '.join(missing)} is not set.")
    numbers = {}
    for name in PROCESS_VARIABLES[1:]:
        try:
            numbers[name] = int(values[name])
        except ValueError:
            raise ValueError(f"{name}={values[name]!r} is not a whole number.") from None
    coordinator = values[PROCESS_VARIABLES[0]].split(",")[0].strip()
    count, index = numbers[PROCESS_VARIABLES[1]], numbers[PROCESS_VARIABLES[2]]
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"KERAS_DISTRIBUTION_PROCESS_ID={index} is outside [0, {count}) processes.")
    if ":" not in coordinator:
        raise ValueError(f"KERAS_DISTRIBUTION_JOB_ADDRESSES starts with {coordinator!r}; process 0's host:port.")
    return coordinator, count, index


def multi_process_data_parallel(num_cpu_devices: int | None = None) -> "keras.distribution.DataParallel":
    """Join the processes Keras's variables name (`processes_from_environment`) and return the
    `DataParallel` distribution over every process's devices (each process's host CPU split
    into `num_cpu_devices` where it has no accelerator), for data each process shares out
    itself (`process_share`, `process_rows`). A ValueError where the variables are not set."""
    processes = processes_from_environment()
    if processes is None:
        raise ValueError(
            f"Training across processes under KERAS_BACKEND=jax needs {', '.join(PROCESS_VARIABLES)} in every "
            "process's environment (process 0's host:port first; docs/distributed.md)."
        )
    if num_cpu_devices and num_cpu_devices > 1:
        backend.split_host_devices(num_cpu_devices)
    initialize_processes(*processes)
    return keras.distribution.DataParallel(devices=keras.distribution.list_devices(), auto_shard_dataset=False)


def process_share(dataset: Iterable, global_batch_size: int) -> Iterable:
    """This process's rows of every batch of the `tf.data.Dataset` `dataset` (batches of up to
    `global_batch_size` rows): with P processes, process p's p-th contiguous `1/P` of each, so that
    the processes together train on the batches one process would. `dataset` itself in a single
    process. Every process runs the whole input pipeline and keeps its share (deterministic, and
    resumable as the single process's is). A batch smaller than `global_batch_size` (a pass's last)
    is shared the same way, so it must hold a multiple of all the devices too (`length_batches`'
    `examples_multiple`). A ValueError where all the devices do not divide the batch."""
    index, count = backend.process_index_and_count()
    if count == 1:
        return dataset
    devices = len(keras.distribution.list_devices())
    if global_batch_size % devices:
        raise ValueError(
            f"The batch size {global_batch_size} is not a multiple of the {devices} devices of the {count} "
            "processes: every device takes an equal share of every batch."
        )
    import tensorflow as tf

    def share(*batch):
        # [n, ...] -> [n / P, ...]: the rows of this process (n a multiple of the devices).
        rows = tf.shape(tf.nest.flatten(batch)[0])[0] // count
        shared = tf.nest.map_structure(lambda t: t[index * rows : (index + 1) * rows], batch)
        return shared if len(batch) > 1 else shared[0]

    return dataset.map(share, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def devices_per_batch() -> int:
    """What every batch's rows must be a multiple of: all the devices of a multi-process JAX run
    (each takes an equal share of each batch, the last one included); 1 otherwise."""
    return len(keras.distribution.list_devices()) if backend.process_index_and_count()[1] > 1 else 1


def initialize_processes(coordinator_address: str, num_processes: int, process_id: int) -> None:
    """Join this process to the others (`keras.distribution.initialize`), before any JAX work:
    `coordinator_address` ("host:port", process 0's), the count and this process's index."""
    if not 0 <= process_id < num_processes:
        raise ValueError(f"process_id {process_id} is outside [0, {num_processes}).")
    backend.enable_cross_process_collectives()
    keras.distribution.initialize(coordinator_address, num_processes=num_processes, process_id=process_id)


def process_rows(num_rows: int, global_batch_size: int, num_processes: int, process_id: int) -> np.ndarray:
    """The indices of the rows this process feeds: its `global_batch_size / num_processes`
    contiguous rows of each global batch, so that with `fit(..., batch_size=global_batch_size //
    num_processes, shuffle=False)` in every process each step sees the same global batch as one
    process with `batch_size=global_batch_size`. A last partial batch is left out."""
    if global_batch_size % num_processes:
        raise ValueError(f"global_batch_size {global_batch_size} is not a multiple of {num_processes} processes.")
    local = global_batch_size // num_processes
    starts = np.arange(0, num_rows - global_batch_size + 1, global_batch_size) + process_id * local
    return (starts[:, None] + np.arange(local)[None, :]).reshape(-1)

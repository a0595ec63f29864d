"""Keras's distribution API for bertlayers' models under JAX: data parallelism across processes
and model parallelism by a layout of the attention and feed-forward kernels.

- Several processes (machines, or several per machine): `initialize_processes` joins them, then
  `keras.distribution.DataParallel(auto_shard_dataset=False)` (or `model_parallel`) spans every
  process's devices, and each process feeds its share of every global batch (`process_rows`).
- Model parallelism: `model_parallel(model_devices)` lays the devices out as a `batch` x `model`
  mesh and shards each block's query/key/value and output projections over the heads and the
  feed-forward kernels over their inner width (`bertlayers.networks.weight_layout`); everything
  else is replicated.

Set the distribution before the model is built: Keras places each variable when it is created.
TensorFlow's strategies (`--strategy mirrored|multi_worker|tpu`) are `bertlayers.training.distribute`.
"""

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

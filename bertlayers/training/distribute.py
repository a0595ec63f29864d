"""tf.distribute strategies for `model.fit`, and what Keras 3.15 needs under them.

Checked on keras 3.15.1 / tensorflow 2.21 (../shared/STACK.md):
  - `jit_compile=True` fails under any strategy (keras#19005) and `steps_per_execution > 1`
    fails too (keras#19246): no workaround, so both are refused with a clear error.
  - MultiWorkerMirroredStrategy fails in two Keras places (keras#20585, tensorflow#72388),
    both worked around in `_patch_keras_for_multi_worker` below, for Keras 3.15 only.
"""

import json
import logging
import os

import keras

from bertlayers import backend
from bertlayers.startup import require_tensorflow
from bertlayers.training.sharding import local_data_parallel, multi_process_data_parallel, processes_from_environment

tf = require_tensorflow(__name__)

logger = logging.getLogger(__name__)

STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")
_PATCHED_KERAS = "3.15."


def build_strategy(
    name: str = "default",
    tpu: str | None = None,
    num_cpu_devices: int | None = None,
    shares_batches: bool = False,
) -> "tf.distribute.Strategy":
    """The tf.distribute strategy named `name`.

    Args:
      name: "default" (one device), "mirrored" (all local GPUs, or `num_cpu_devices` logical
        CPUs), "multi_worker" (MultiWorkerMirroredStrategy; workers from TF_CONFIG) or "tpu".
      tpu: the TPU name or address for `TPUClusterResolver` (name "tpu" only).
      num_cpu_devices: split the CPU into this many logical devices (mirrored training without
        GPUs, as tests do). Must run before TensorFlow executes any op.
      shares_batches: whether the caller feeds each JAX process its share of every batch
        (`sharding.process_share` or `process_rows`); without it "multi_worker" is refused under JAX.

    Under KERAS_BACKEND=jax, JAX runs the steps and TensorFlow's strategies would place nothing:
    "mirrored" sets Keras's data parallelism over this process's devices instead
    (`sharding.local_data_parallel`: every GPU or TPU core, or `num_cpu_devices` host devices),
    "multi_worker" joins the processes Keras's KERAS_DISTRIBUTION_* variables name and sets data
    parallelism over all their devices (`sharding.multi_process_data_parallel`), and the default
    strategy is returned; "tpu" is refused, naming what to use.
    """
    if name not in STRATEGIES:
        raise ValueError(f"Unknown strategy {name!r}; choose from {', '.join(STRATEGIES)}.")
    if backend.name() == "jax":
        return _jax_strategy(name, num_cpu_devices, shares_batches)
    if num_cpu_devices and num_cpu_devices > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        try:
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(num_cpu_devices)]
            )
        except RuntimeError as error:
            raise RuntimeError(
                f"Cannot split the CPU into {num_cpu_devices} devices: TensorFlow already ran ops "
                f"({error}). Build the strategy first."
            ) from None
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        devices = None
        if not tf.config.list_physical_devices("GPU"):
            devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices=devices)
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError("--strategy multi_worker needs the TF_CONFIG environment variable (cluster and task).")
        _patch_keras_for_multi_worker()
        return tf.distribute.MultiWorkerMirroredStrategy()
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def _jax_strategy(name, num_cpu_devices, shares_batches):
    if name == "tpu":
        raise ValueError(
            "--strategy tpu is TensorFlow's; under KERAS_BACKEND=jax JAX sees a TPU's cores as its devices: "
            "--strategy mirrored uses every device of this process (docs/distributed.md)."
        )
    if name == "multi_worker" and not shares_batches:
        raise ValueError(
            "--strategy multi_worker under KERAS_BACKEND=jax trains across processes in the runners whose "
            "processes each feed their share of every batch (pretrain.py and the fine-tuning runners); this one "
            "trains on the devices of one process: --strategy mirrored (its GPUs, its TPU cores, or "
            "--num_cpu_devices host devices)."
        )
    if name == "mirrored":
        distribution = local_data_parallel(num_cpu_devices)
    elif name == "multi_worker":
        distribution = multi_process_data_parallel(num_cpu_devices)
    else:
        return tf.distribute.get_strategy()
    keras.distribution.set_distribution(distribution)
    index, count = backend.process_index_and_count()
    across = f" in {count} processes (this is process {index})" if count > 1 else ""
    logger.info(f"data parallel over {distribution.device_mesh.devices.size} JAX devices{across}")
    return tf.distribute.get_strategy()


def is_distributed(strategy):
    return isinstance(
        strategy,
        (tf.distribute.MirroredStrategy, tf.distribute.MultiWorkerMirroredStrategy, tf.distribute.TPUStrategy),
    )


def gathers_across_workers(model: keras.Model) -> bool:
    """Whether `model` runs under TensorFlow's multi-worker strategy, whose `predict_on_batch`
    returns every worker's outputs for the batch (each worker passing the same batch gets its rows
    once per worker): such a model predicts by calling it (`compiled_predictor`), each worker
    computing every row itself."""
    return isinstance(getattr(model, "distribute_strategy", None), tf.distribute.MultiWorkerMirroredStrategy)


def compile_options(
    strategy: "tf.distribute.Strategy", jit_compile: bool = False, steps_per_execution: int = 1
) -> dict:
    """`jit_compile` / `steps_per_execution` for `model.compile`, refusing what breaks under `strategy`.

    Under KERAS_BACKEND=jax the step is always compiled (`jax.jit`, whatever `jit_compile` says):
    JAX has no graph mode short of XLA, and Keras without it runs the step op by op from Python
    (a tiny BERT's pretraining step 10x slower on CPU); the tf.distribute refusals do not apply."""
    if backend.name() == "jax":
        return {"jit_compile": True, "steps_per_execution": int(steps_per_execution)}
    if is_distributed(strategy) and not isinstance(strategy, tf.distribute.TPUStrategy):
        if jit_compile:
            raise ValueError(
                "jit_compile (XLA) fails under tf.distribute with Keras 3.15 (keras#19005); "
                "use it with --strategy default only."
            )
        if steps_per_execution > 1:
            raise ValueError("steps_per_execution > 1 fails under tf.distribute with Keras 3.15 (keras#19246); use 1.")
    return {"jit_compile": bool(jit_compile), "steps_per_execution": int(steps_per_execution)}


def worker_info() -> tuple[str, int, bool]:
    """(task type, index, is_chief) of this process: from TF_CONFIG, or under KERAS_BACKEND=jax
    from Keras's KERAS_DISTRIBUTION_* variables (process 0 is the chief); chief when absent."""
    if backend.name() == "jax":
        processes = processes_from_environment()
        index = 0 if processes is None else processes[2]
        return "worker", index, index == 0
    config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    task = config.get("task", {})
    task_type, index = task.get("type", "worker"), int(task.get("index", 0))
    cluster = config.get("cluster", {})
    is_chief = task_type == "chief" or (task_type == "worker" and index == 0 and "chief" not in cluster)
    return task_type, index, is_chief


def _patch_keras_for_multi_worker():
    """Work around Keras 3.15's two MultiWorkerMirroredStrategy bugs (once per process).

    1. `_maybe_symbolic_build` mean-reduces the first input batch across workers to build
       the model; collective all-reduce rejects integer dicts (keras#20585). Building only
       needs shapes, so this replica's own values serve.
    2. `reduce_per_replica` mean-reduces scalar logs along axis 0 (tensorflow#72388); a
       cross-replica mean needs axis=None.
    """
    if not keras.__version__.startswith(_PATCHED_KERAS):
        raise RuntimeError(
            f"--strategy multi_worker is supported with Keras {_PATCHED_KERAS}x, whose bugs bertlayers "
            f"works around; this is Keras {keras.__version__}. Check keras#20585 before using it."
        )
    tf_trainer = backend.tensorflow_trainer_module()

    if getattr(tf_trainer, "_bertlayers_patched", False):
        return
    original_reduce = tf_trainer.reduce_per_replica

    def reduce_per_replica(values, strategy, reduction):
        if tf_trainer._collective_all_reduce_multi_worker(strategy) and reduction in ("auto", "mean"):
            return tf.nest.map_structure(
                lambda v: (
                    strategy.reduce("MEAN", v, axis=None) if isinstance(v, tf.distribute.DistributedValues) else v
                ),
                values,
            )
        return original_reduce(values, strategy, reduction)

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        if self._distribute_strategy is None:
            return
        if iterator is not None:
            for _, _, it in iterator:
                batch = next(it)
                data_batch = tf.nest.map_structure(
                    lambda v: (
                        self.distribute_strategy.experimental_local_results(v)[0]
                        if isinstance(v, tf.distribute.DistributedValues)
                        else v
                    ),
                    batch,
                )
                break
        with self.distribute_strategy.scope():
            self._symbolic_build(data_batch=data_batch)

    tf_trainer.reduce_per_replica = reduce_per_replica
    tf_trainer.TensorFlowTrainer._maybe_symbolic_build = _maybe_symbolic_build
    tf_trainer._bertlayers_patched = True

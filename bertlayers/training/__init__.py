"""Training: optimizers, tf.distribute strategies, Keras's distribution under JAX (`sharding`),
resumable backups and length-cut batches (the runs that use them are in `bertlayers.runs`)."""

from bertlayers.startup import tensorflow_available
from bertlayers.training.callbacks import JsonHistory, LearningRateLogger, StopOnDivergence, TrainingDiverged
from bertlayers.training.checkpointing import ResumableBackup
from bertlayers.training.optimization import WarmupLinearDecay, create_optimizer
from bertlayers.training.sharding import initialize_processes, model_parallel, process_rows

if tensorflow_available():  # tf.distribute and tf.data (the rest works without TensorFlow)
    from bertlayers.training.distribute import build_strategy, compile_options, worker_info
    from bertlayers.training.length_batching import length_batches, predict_by_length

__all__ = [
    "JsonHistory",
    "LearningRateLogger",
    "ResumableBackup",
    "StopOnDivergence",
    "TrainingDiverged",
    "WarmupLinearDecay",
    "build_strategy",
    "compile_options",
    "create_optimizer",
    "initialize_processes",
    "length_batches",
    "model_parallel",
    "predict_by_length",
    "process_rows",
    "worker_info",
]

"""Training: optimizers, tf.distribute strategies, resumable backups and length-cut batches (the
runs that use them are in `bertlayers.runs`)."""

import importlib

from bertlayers.training.callbacks import JsonHistory, LearningRateLogger
from bertlayers.training.checkpointing import ResumableBackup
from bertlayers.training.optimization import WarmupLinearDecay, create_optimizer

# tf.distribute and tf.data: imported when first asked for, so the rest works without TensorFlow.
_NEED_TENSORFLOW = {
    "build_strategy": "bertlayers.training.distribute",
    "compile_options": "bertlayers.training.distribute",
    "worker_info": "bertlayers.training.distribute",
    "length_batches": "bertlayers.training.length_batching",
    "predict_by_length": "bertlayers.training.length_batching",
}


def __getattr__(name):
    if name in _NEED_TENSORFLOW:
        return getattr(importlib.import_module(_NEED_TENSORFLOW[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "JsonHistory",
    "LearningRateLogger",
    "ResumableBackup",
    "WarmupLinearDecay",
    "build_strategy",
    "compile_options",
    "create_optimizer",
    "length_batches",
    "predict_by_length",
    "worker_info",
]

"""A run's output folder: one run's files, never two runs' mixed, never a finished run replaced
unasked; the start of a fine-tuning run that claims it, and what the run writes there last.

Fine-tuning and distillation do not resume (a kill mid-`fit` loses the epoch; pretraining keeps
backups and resumes instead). A second run into a folder that already holds a run's files would
replace the first run's `model.keras` and metrics as it goes, and, killed midway, leave both runs'
files side by side with nothing telling them apart. So a folder holding a run (finished: its
`model.keras` or `metrics.json` written; interrupted: only part of them) is refused by name, unless
the user asks to overwrite it; then the earlier run's files are removed before anything is written.
"""

import atexit
import fnmatch
import logging
import os
import shutil
import tempfile

import keras

from bertlayers.runs.finetuning_config import FinetuningConfig, check_config
from bertlayers.startup import require_tensorflow
from bertlayers.training.distribute import build_strategy, worker_info
from bertlayers.utils import atomic_files

__all__ = [
    "files_written",
    "start",
    "take_output_folder",
    "write_json",
]

tf = require_tensorflow(__name__)

logger = logging.getLogger(__name__)

# What the runners write into their --output_dir (files, folders and patterns).
RUN_OUTPUTS = (
    "model.keras",
    "metrics.json",
    "history.json",
    "history.png",
    "ensemble.png",
    "logs",
    "predictions.json",
    "predictions.jsonl",
    "predictions.conll",
    "nbest_predictions.json",
    "tags.json",
    "summary.json",
    "savedmodels",
    "dual_encoder",
    "reranker",
    "restart_*",
    "member_*",
)
FINISHED = ("model.keras", "metrics.json")


def _is_run_output(name):
    return any(fnmatch.fnmatch(name, pattern) for pattern in RUN_OUTPUTS)


def take_output_folder(directory: str, what: str, overwrite: bool = False) -> None:
    """Claim `directory` for this process's run (a second live run into it is refused:
    `FolderBusyError`), refusing one that holds an earlier run's files unless `overwrite`.

    Raises:
      FileExistsError: the folder holds a run and `overwrite` is off, or `overwrite` is on but the
        folder also holds files no run writes (they are not this library's to delete).
    """
    atomic_files.make_folder(directory)
    atomic_files.claim(directory, what)
    atomic_files.remove_orphaned_staging(directory)
    entries = sorted(name for name in os.listdir(directory) if not name.startswith("."))
    if not entries:
        return
    state = "a finished run" if any(name in FINISHED for name in entries) else "an interrupted run"
    listed = ", ".join(entries[:6]) + (", ..." if len(entries) > 6 else "")
    if not overwrite:
        raise FileExistsError(
            f"{directory} already holds {state} ({listed}); runs here do not resume. Pass --overwrite to "
            "replace it, or choose another --output_dir."
        )
    foreign = [name for name in entries if not _is_run_output(name)]
    if foreign:
        raise FileExistsError(
            f"--overwrite would replace the run in {directory}, but it also holds files no run writes "
            f"({', '.join(foreign[:6])}); choose an empty --output_dir."
        )
    for name in entries:
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)


def start(config: "FinetuningConfig") -> "tf.distribute.Strategy":
    """Build the strategy (before TensorFlow runs any op), seed everything, and take the output
    folder (a second live run into it is refused, `FolderBusyError`; one holding an earlier run's
    files too, `FileExistsError`, unless `config.overwrite`).

    In a run of several workers (`--strategy multi_worker`) the chief (worker 0) writes the run's
    files; every other worker computes the same and writes its copies to a temporary folder,
    removed when it ends: `config.output_dir` is changed to that folder there, so a runner writes
    everything to `config.output_dir`."""
    check_config(config)
    # Each JAX process feeds its share of every batch (`fit_task_model`, `predict_by_length`).
    strategy = build_strategy(
        config.strategy, tpu=config.tpu, num_cpu_devices=config.num_cpu_devices, shares_batches=True
    )
    keras.utils.set_random_seed(config.seed)
    _, worker, is_chief = worker_info()
    if not is_chief:
        config.output_dir = _worker_folder(worker)
    # One run at a time in a folder, and one run's files in it (see `take_output_folder`).
    take_output_folder(config.output_dir, "fine-tuning run in", overwrite=config.overwrite)
    return strategy


def _worker_folder(worker):
    """A folder of its own for a worker that is not the chief, removed when the process ends."""
    folder = tempfile.mkdtemp(prefix=f"bertlayers-worker{worker}-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    logger.info(f"Worker {worker}: the chief writes the run's files; this worker's copies go to {folder}")
    return folder


def files_written(output_dir: str) -> str:
    """A line naming what a run left in `output_dir` (its files and folders, TensorBoard's logs
    named as such): what a runner prints last. A worker other than the chief says the chief
    writes them."""
    _, worker, is_chief = worker_info()
    if not is_chief:
        return f"Worker {worker} done; the chief (worker 0) writes the run's files."
    names = sorted(os.listdir(output_dir)) if os.path.isdir(output_dir) else []
    shown = [
        f"{name}/ (TensorBoard: tensorboard --logdir {os.path.join(output_dir, name)})"
        if name == "logs"
        else name + ("/" if os.path.isdir(os.path.join(output_dir, name)) else "")
        for name in names
        if not name.startswith(".")
    ]
    return f"Files in {os.path.abspath(output_dir)}: {', '.join(shown)}"


def write_json(path: str, value: dict | list) -> None:
    """Write `value` as indented JSON to `path`, atomically."""
    atomic_files.write_json(path, value, indent=1)

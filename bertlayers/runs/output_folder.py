"""A run's output folder: one run's files, never two runs' mixed, never a finished run replaced unasked.

Fine-tuning and distillation do not resume (a kill mid-`fit` loses the epoch; pretraining keeps
backups and resumes instead). A second run into a folder that already holds a run's files would
replace the first run's `model.keras` and metrics as it goes, and, killed midway, leave both runs'
files side by side with nothing telling them apart. So a folder holding a run (finished: its
`model.keras` or `metrics.json` written; interrupted: only part of them) is refused by name, unless
the user asks to overwrite it; then the earlier run's files are removed before anything is written.
"""

import fnmatch
import os
import shutil

from bertlayers.utils import atomic_files

__all__ = [
    "take_output_folder",
]

# What the runners write into their --output_dir (files, folders and patterns).
RUN_OUTPUTS = (
    "model.keras",
    "metrics.json",
    "history.json",
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

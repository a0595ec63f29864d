"""Resuming a killed `model.fit` exactly where its last backup stood."""

import glob
import json
import logging
import os

import keras
import numpy as np

from bertlayers import backend
from bertlayers.utils import atomic_files

logger = logging.getLogger(__name__)


@keras.saving.register_keras_serializable(package="bertlayers")
class ResumableBackup(keras.callbacks.BackupAndRestore):
    """`keras.callbacks.BackupAndRestore` whose backups survive a kill at any instant.

    Keras 3.15's callback overwrites one weights file in place and then its metadata, so a
    kill mid-write leaves a torn file or weights that disagree with the recorded epoch. Here
    each backup is a new `epoch-N.weights.h5` (model and optimizer state) renamed into place,
    and then `training_metadata.json`, also renamed into place, points at it. The restore
    point is readable before `fit` starts (`restored_epoch`), so the input pipeline can skip
    the batches already consumed. The record also holds the dropout layers' random generators'
    states, which a weights file leaves out: a resumed run draws the dropout masks the
    uninterrupted run would. Backups are taken at the end of each epoch: make an epoch as long as
    the wanted checkpoint interval (`steps_per_epoch`).
    """

    METADATA = "training_metadata.json"

    def __init__(self, backup_dir: str, keep: int = 2) -> None:
        super().__init__(backup_dir, save_freq="epoch", delete_checkpoint=False)
        self.keep = int(keep)

    @classmethod
    def read_metadata(cls, backup_dir):
        """The backup's `training_metadata.json` (the last completed epoch), or None when there is none."""
        path = os.path.join(backup_dir, cls.METADATA)
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            metadata = json.loads(text)
            int(metadata["epoch"]), str(metadata["weights"])
        except (ValueError, KeyError, TypeError):
            raise ValueError(
                f'{path} is not a backup record (expected {{"epoch": N, "weights": NAME}}); it was not '
                f"written by this library. Move it away to start the run afresh."
            ) from None
        return metadata

    @classmethod
    def restored_epoch(cls, backup_dir):
        """The number of completed epochs a restart resumes after (0 for a fresh run)."""
        metadata = cls.read_metadata(backup_dir)
        return int(metadata["epoch"]) if metadata else 0

    def _save_model(self):
        name = f"epoch-{self._current_epoch:06d}.weights.h5"
        atomic_files.save_weights(self.model, os.path.join(self.backup_dir, name))
        states = [keras.ops.convert_to_numpy(v.value).tolist() for v in backend.random_states(self.model)]
        atomic_files.write_json(
            os.path.join(self.backup_dir, self.METADATA),
            {"epoch": self._current_epoch, "weights": name, "random_states": states},
        )
        backups = sorted(glob.glob(os.path.join(self.backup_dir, "epoch-*.weights.h5")))
        for old in backups[: -self.keep]:
            os.remove(old)

    def _load_model(self):
        atomic_files.remove_orphaned_staging(self.backup_dir)
        metadata = self.read_metadata(self.backup_dir)
        if metadata is None:
            return
        if self.model.optimizer is not None and not self.model.optimizer.built:
            self.model.optimizer.build(self.model.trainable_variables)
        self.model.load_weights(os.path.join(self.backup_dir, metadata["weights"]))
        states, variables = metadata.get("random_states"), backend.random_states(self.model)
        if states is not None and len(states) == len(variables):
            for variable, state in zip(variables, states):
                variable.assign(np.asarray(state, dtype=keras.backend.standardize_dtype(variable.dtype)))
        elif states is not None:
            logger.warning(
                f"{self.backup_dir}: the backup holds {len(states)} random generators' states and the model has "
                f"{len(variables)}; dropout restarts its random stream."
            )
        self.model._initial_epoch = int(metadata["epoch"])

    def get_config(self):
        return {"backup_dir": self.backup_dir, "keep": self.keep}

"""Atomic writes, and resuming a killed `model.fit` exactly where its last backup stood."""

import contextlib
import glob
import json
import os
import tempfile

import keras


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside `path`; on success rename it to `path` in one step.

    A kill at any moment leaves either the old file or the complete new one, never a torn
    file. The temporary name keeps `path`'s suffix (Keras checks extensions).
    """
    directory, name = os.path.split(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".partial-", suffix="-" + name, dir=directory)
    os.close(handle)
    os.remove(temporary)
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def save_model_atomically(model, path):
    with atomic_path(path) as temporary:
        model.save(temporary)


@keras.saving.register_keras_serializable(package="bertlayers")
class ResumableBackup(keras.callbacks.BackupAndRestore):
    """`keras.callbacks.BackupAndRestore` whose backups survive a kill at any instant.

    Keras 3.15's callback overwrites one weights file in place and then its metadata, so a
    kill mid-write leaves a torn file or weights that disagree with the recorded epoch. Here
    each backup is a new `epoch-N.weights.h5` (model and optimizer state) renamed into place,
    and then `training_metadata.json`, also renamed into place, points at it. The restore
    point is readable before `fit` starts (`restored_epoch`), so the input pipeline can skip
    the batches already consumed. Backups are taken at the end of each epoch: make an epoch
    as long as the wanted checkpoint interval (`steps_per_epoch`).
    """

    METADATA = "training_metadata.json"

    def __init__(self, backup_dir, keep=2):
        super().__init__(backup_dir, save_freq="epoch", delete_checkpoint=False)
        self.keep = int(keep)

    @classmethod
    def read_metadata(cls, backup_dir):
        path = os.path.join(backup_dir, cls.METADATA)
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    @classmethod
    def restored_epoch(cls, backup_dir):
        """The number of completed epochs a restart resumes after (0 for a fresh run)."""
        metadata = cls.read_metadata(backup_dir)
        return int(metadata["epoch"]) if metadata else 0

    def _save_model(self):
        name = f"epoch-{self._current_epoch:06d}.weights.h5"
        with atomic_path(os.path.join(self.backup_dir, name)) as temporary:
            self.model.save_weights(temporary)
        with atomic_path(os.path.join(self.backup_dir, self.METADATA)) as temporary:
            with open(temporary, "w", encoding="utf-8") as f:
                json.dump({"epoch": self._current_epoch, "weights": name}, f)
                f.flush()
                os.fsync(f.fileno())
        backups = sorted(glob.glob(os.path.join(self.backup_dir, "epoch-*.weights.h5")))
        for old in backups[: -self.keep]:
            os.remove(old)

    def _load_model(self):
        metadata = self.read_metadata(self.backup_dir)
        if metadata is None:
            return
        if self.model.optimizer is not None and not self.model.optimizer.built:
            self.model.optimizer.build(self.model.trainable_variables)
        self.model.load_weights(os.path.join(self.backup_dir, metadata["weights"]))
        self.model._initial_epoch = int(metadata["epoch"])

    def get_config(self):
        return {"backup_dir": self.backup_dir, "keep": self.keep}

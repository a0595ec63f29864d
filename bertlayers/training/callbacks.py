"""Callbacks for training runs: learning-rate logging, a JSON history, a stop where training
diverges, and the epoch kept on the validation loss."""

import json
import logging
import math
import os

import keras

from bertlayers.utils import atomic_files
from bertlayers.utils.charts import training_curves

logger = logging.getLogger(__name__)


class LearningRateLogger(keras.callbacks.Callback):
    """Adds `learning_rate` to the logs (so TensorBoard and the history record it).

    It reads the rate every `every` batches and at epoch ends only: reading it is a host
    round trip, which stays off most steps.
    """

    def __init__(self, every: int = 50) -> None:
        super().__init__()
        self.every = int(every)

    def _rate(self):
        optimizer = self.model.optimizer
        return float(keras.ops.convert_to_numpy(optimizer.learning_rate))

    def on_train_batch_end(self, batch, logs=None):
        if logs is not None and self.every and (batch + 1) % self.every == 0:
            logs["learning_rate"] = self._rate()

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["learning_rate"] = self._rate()


class TrainingDiverged(ValueError):
    """Training reached a loss that is not a number: the settings (a learning rate too high,
    targets far off the scale of the rest) cannot train this model."""


class StopOnDivergence(keras.callbacks.Callback):
    """Ends `fit` with `TrainingDiverged` at the end of the first epoch whose loss (or any logged
    metric) is NaN or infinite: before the history records it and before a run saves a model
    whose weights are not numbers (put it first among the callbacks)."""

    def on_epoch_end(self, epoch, logs=None):
        bad = {k: float(v) for k, v in (logs or {}).items() if not math.isfinite(float(v))}
        if bad:
            raise TrainingDiverged(
                f"training diverged: after epoch {epoch + 1}, {', '.join(f'{k} is {v}' for k, v in bad.items())}; "
                "nothing of this run was saved as a model. Lower the learning rate, or check the targets (a label "
                "far off the scale of the others, such as 1e30 in a regression)."
            )


class JsonHistory(keras.callbacks.Callback):
    """Appends each epoch's logs to a JSON file (kept across resumed runs), written atomically;
    with `chart`, the curves of the whole history are drawn beside it when training ends (the
    same name, `.png`; `bertlayers.utils.charts.training_curves`, where matplotlib is installed)."""

    def __init__(self, path: str, chart: bool = True) -> None:
        super().__init__()
        self.path = path
        self.chart = chart

    def on_train_end(self, logs=None):
        if self.chart and os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as f:
                training_curves(json.load(f), os.path.splitext(self.path)[0] + ".png")

    def on_epoch_end(self, epoch, logs=None):
        history = []
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as f:
                history = json.load(f)
        history = [h for h in history if h["epoch"] < epoch]
        history.append({"epoch": epoch, **{k: float(v) for k, v in (logs or {}).items()}})
        atomic_files.write_json(self.path, history, indent=1)


class BestEpoch(keras.callbacks.EarlyStopping):
    """Keras's early stopping on the validation loss, which logs the epoch it keeps instead of
    printing it. `keep_best`: the model ends with that epoch's weights."""

    def __init__(self, keep_best: bool, patience: int):
        super().__init__(monitor="val_loss", patience=patience, restore_best_weights=keep_best, verbose=0)

    def on_train_end(self, logs=None):
        super().on_train_end(logs)
        if self.stopped_epoch > 0:
            logger.info(f"Stopped after epoch {self.stopped_epoch + 1}: no lower validation loss for {self.patience}")
        if self.restore_best_weights and self.best_weights is not None:
            logger.info(f"Keeping the weights of epoch {self.best_epoch + 1} (validation loss {self.best:.4f})")

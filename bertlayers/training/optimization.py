"""BERT's optimizer: AdamW (or LAMB), linear warmup then linear decay, global-norm clipping."""

import keras
import tensorflow as tf
from keras import ops

# Variables BERT exempts from weight decay: LayerNorm scales and offsets, and every bias.
NO_DECAY = ("bias", "gamma", "beta")


@keras.saving.register_keras_serializable(package="bertlayers")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = peak · step / warmup for step < warmup, then peak · (total − step) / (total − warmup),
    reaching `end_learning_rate` at `total_steps` and staying there."""

    def __init__(self, peak_learning_rate, total_steps, warmup_steps, end_learning_rate=0.0):
        if total_steps <= 0 or not 0 <= warmup_steps <= total_steps:
            raise ValueError(
                f"Need 0 <= warmup_steps ({warmup_steps}) <= total_steps ({total_steps}) and total_steps > 0."
            )
        self.peak_learning_rate = float(peak_learning_rate)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)
        self.end_learning_rate = float(end_learning_rate)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        peak, end = self.peak_learning_rate, self.end_learning_rate
        warmup = peak * step / max(self.warmup_steps, 1)
        decay_span = max(self.total_steps - self.warmup_steps, 1)
        progress = ops.clip((step - self.warmup_steps) / decay_span, 0.0, 1.0)
        decay = end + (peak - end) * (1.0 - progress)
        return ops.where(step < self.warmup_steps, warmup, decay)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
            "end_learning_rate": self.end_learning_rate,
        }


class SumThenClip:
    """Under tf.distribute, sum gradients across replicas before clipping them.

    Keras 3.15 clips each replica's partial gradient and only then sums the replicas
    (`_backend_apply_gradients` runs `_clip_gradients` before `_backend_update_step`), so a
    global norm of 1.0 lets a 2-replica step reach norm 2 and training differs from one
    device. Here the all-reduce moves ahead of the clipping and Keras's own all-reduce is
    skipped; with one replica nothing changes. Verified for Keras 3.15 only: other versions
    keep Keras's behaviour.
    """

    _FIXED_IN = "3.15."

    def _clip_gradients(self, grads):
        context = tf.distribute.get_replica_context()
        clips = self.clipnorm or self.global_clipnorm or self.clipvalue
        if (
            clips
            and keras.__version__.startswith(self._FIXED_IN)
            and context is not None
            and context.num_replicas_in_sync > 1
        ):
            present = [g for g in grads if g is not None]
            summed = iter(context.all_reduce(tf.distribute.ReduceOp.SUM, present))
            grads = [None if g is None else next(summed) for g in grads]
            self._gradients_summed = True  # read while tracing the same step, below
        return super()._clip_gradients(grads)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if getattr(self, "_gradients_summed", False):
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)


@keras.saving.register_keras_serializable(package="bertlayers")
class AdamW(SumThenClip, keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` that clips the cross-replica gradient (see `SumThenClip`)."""


@keras.saving.register_keras_serializable(package="bertlayers")
class Lamb(SumThenClip, keras.optimizers.Lamb):
    """`keras.optimizers.Lamb` that clips the cross-replica gradient (see `SumThenClip`)."""


def create_optimizer(
    learning_rate,
    total_steps,
    warmup_steps,
    optimizer="adamw",
    weight_decay=0.01,
    clip_global_norm=1.0,
    beta_1=0.9,
    beta_2=0.999,
    epsilon=1e-6,
):
    """The optimizer of BERT pretraining and fine-tuning.

    Args:
      learning_rate: the peak learning rate.
      total_steps, warmup_steps: the schedule's length and linear warmup.
      optimizer: "adamw" or "lamb" (large-batch training, as in the LAMB paper).
      weight_decay: decoupled weight decay, not applied to LayerNorm parameters or biases.
      clip_global_norm: clip gradients to this global norm (None for no clipping).
    """
    schedule = WarmupLinearDecay(learning_rate, total_steps, warmup_steps)
    common = dict(
        learning_rate=schedule,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        weight_decay=weight_decay,
        global_clipnorm=clip_global_norm,
    )
    if optimizer == "adamw":
        result = AdamW(**common)
    elif optimizer == "lamb":
        result = Lamb(**common)
    else:
        raise ValueError(f"Unknown optimizer {optimizer!r}; use 'adamw' or 'lamb'.")
    result.exclude_from_weight_decay(var_names=list(NO_DECAY))
    return result

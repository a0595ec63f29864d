"""Knowledge distillation (Hinton, Vinyals and Dean 2015): a small student learns from the
soft targets of a large teacher, through `model.fit`.

    p_t = softmax(z_t / T),  p_s = softmax(z_s / T)       teacher / student logits z, temperature T
    soft ("kl"):   T² · KL(p_t ‖ p_s)    (the cross-entropy to p_t less the teacher's own entropy:
                                           the same gradient; T² keeps its scale as T grows)
    soft ("mse"):  mean_c (z_s − z_t)²    (logit matching, Ba and Caruana 2014)
    loss = (1 − α) · soft + α · CE(labels, z_s)       α = `hard_label_weight`, labels optional
"""

import keras
from keras import ops

from bertlayers.layers.weighted_mean import weighted_mean
from bertlayers.networks.guarded_model import GuardedModel

SOFT_LOSSES = ("kl", "mse")


@keras.saving.register_keras_serializable(package="bertlayers")
class Distiller(GuardedModel, keras.Model):
    """A student classifier trained on a frozen teacher's logits.

    Works with any two models of the library that output `logits` over the same classes and
    read the same token ids (`SequenceClassifier`, `TokenClassifier`); calling the distiller
    runs the student.

    `fit(x, y)` takes `x` the inputs both models read, and `y` either nothing (the teacher
    runs in inference mode at every step) or a dict with any of `teacher_logits` (targets
    computed once with `soft_targets`: the teacher then does not run during training) and
    `labels` (hard labels, used when `hard_label_weight > 0`).

    Args:
      student: the model trained.
      teacher: the model imitated; never trained. May be None when every `fit` gets
        `teacher_logits`.
      temperature: T of the soft targets (> 0).
      soft_loss: "kl" (cross-entropy to the softened teacher distribution) or "mse" (on logits).
      hard_label_weight: α, the share of the loss given to the hard labels.

    Metrics: `soft_loss`, `hard_loss` (with `hard_label_weight > 0`), and `agreement`, the share of
    examples where student and teacher pick the same class.
    """

    def __init__(
        self,
        student: keras.Model,
        teacher: keras.Model | None = None,
        temperature: float = 2.0,
        soft_loss: str = "kl",
        hard_label_weight: float = 0.0,
        name: str = "distiller",
        **kwargs,
    ) -> None:
        super().__init__(name=name, **kwargs)
        if soft_loss not in SOFT_LOSSES:
            raise ValueError(f"Unknown soft_loss {soft_loss!r}; use one of {SOFT_LOSSES}.")
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}.")
        if not 0.0 <= hard_label_weight <= 1.0:
            raise ValueError(f"hard_label_weight must be in [0, 1], got {hard_label_weight}.")
        if teacher is not None:
            _check_compatible(student, teacher)
            teacher.trainable = False
        self.student = student
        self.teacher = teacher
        self.temperature = float(temperature)
        self.soft_loss = soft_loss
        self.hard_label_weight = float(hard_label_weight)
        self.soft_loss_tracker = keras.metrics.Mean(name="soft_loss")
        if self.hard_label_weight > 0:
            self.hard_loss_tracker = keras.metrics.Mean(name="hard_loss")
        self.agreement_tracker = keras.metrics.Mean(name="agreement")

    @property
    def trainable_weights(self):
        # The student's alone, whatever `trainable` a caller (or a loaded config) sets here.
        return self.student.trainable_weights

    @property
    def trainable_variables(self):
        return self.trainable_weights

    def call(self, inputs, training=None):
        return self.student(inputs, training=training)

    def _input_specs(self):  # the student's inputs are the distiller's
        return self.student._input_specs()

    def input_value_limits(self):
        return self.student.input_value_limits()

    def soft_targets(self, x, batch_size=32, verbose="auto"):
        """The teacher's logits for `x`, computed once: pass them as `y["teacher_logits"]`."""
        if self.teacher is None:
            raise ValueError("This Distiller has no teacher to compute soft targets with.")
        return self.teacher.predict(x, batch_size=batch_size, verbose=verbose)["logits"]

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        y = y if isinstance(y, dict) else ({} if y is None else {"labels": y})
        unknown = set(y) - {"teacher_logits", "labels"}
        if unknown:
            raise ValueError(f"Distiller targets are 'teacher_logits' and 'labels'; got {sorted(unknown)}.")
        student = y_pred["logits"]  # [B, C] or [B, S, C], float32
        if "teacher_logits" in y:
            teacher = ops.cast(y["teacher_logits"], student.dtype)
        elif self.teacher is not None:
            teacher = self.teacher(x, training=False)["logits"]
        else:
            raise ValueError("A Distiller without a teacher needs y['teacher_logits'].")
        teacher = ops.stop_gradient(teacher)

        # Per example (per token for taggers), then averaged under the sample weights.
        if self.soft_loss == "kl":
            t = self.temperature
            log_target = ops.log_softmax(teacher / t, axis=-1)  # log p_t
            log_student = ops.log_softmax(student / t, axis=-1)  # log p_s
            soft = t * t * ops.sum(ops.exp(log_target) * (log_target - log_student), axis=-1)
        else:
            soft = ops.mean(ops.square(student - teacher), axis=-1)
        soft = _weighted_mean(soft, sample_weight)
        loss = soft
        self.soft_loss_tracker.update_state(soft)
        if "labels" in y and self.hard_label_weight > 0:
            hard = keras.losses.sparse_categorical_crossentropy(y["labels"], student, from_logits=True)
            hard = _weighted_mean(hard, sample_weight)
            self.hard_loss_tracker.update_state(hard)
            loss = (1.0 - self.hard_label_weight) * soft + self.hard_label_weight * hard
        same = ops.cast(ops.argmax(student, axis=-1) == ops.argmax(teacher, axis=-1), "float32")
        self.agreement_tracker.update_state(_weighted_mean(same, sample_weight))
        return loss

    def get_config(self):
        return {
            "student": keras.saving.serialize_keras_object(self.student),
            "teacher": None if self.teacher is None else keras.saving.serialize_keras_object(self.teacher),
            "temperature": self.temperature,
            "soft_loss": self.soft_loss,
            "hard_label_weight": self.hard_label_weight,
            "name": self.name,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["student"] = keras.saving.deserialize_keras_object(config["student"])
        if config.get("teacher") is not None:
            config["teacher"] = keras.saving.deserialize_keras_object(config["teacher"])
        return cls(**config)


def _weighted_mean(values, sample_weight):
    if sample_weight is None:
        return ops.mean(values)
    if isinstance(sample_weight, dict):
        sample_weight = sample_weight["logits"]
    return weighted_mean(values, sample_weight)


def _check_compatible(student, teacher):
    """Both models must read the same token ids and predict the same classes."""
    classes = [getattr(m, "num_classes", None) for m in (student, teacher)]
    if classes[0] != classes[1]:
        raise ValueError(f"Student and teacher predict different numbers of classes: {classes[0]} vs {classes[1]}.")
    sizes = [getattr(getattr(m, "encoder", None), "config", None) for m in (student, teacher)]
    if all(sizes) and sizes[0].vocabulary_size != sizes[1].vocabulary_size:
        raise ValueError(
            f"Student and teacher must read the same token ids: vocabulary sizes {sizes[0].vocabulary_size} "
            f"(student) and {sizes[1].vocabulary_size} (teacher)."
        )

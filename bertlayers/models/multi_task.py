"""Multi-task fine-tuning (MT-DNN style): one encoder, a head per task, trained on batches that mix
the tasks' examples.

Dimensions: B batch (examples of every task), S sequence, H hidden, C_t task t's classes.

    encoder(inputs)                                  pooled [B, H], sequence [B, S, H], run once
    classification task t: ClassificationHead(pooled)        logits_t [B, C_t]
    tagging task t:        TokenClassificationHead(sequence) logits_t [B, S, C_t]

Every head scores every example; an example trains only its own task's head, through the sample
weights (`bertlayers.task_data.multi_task.mix_tasks` writes them: 1 on an example's own task,
0 on the others). Keras averages each task's weighted loss over the whole batch, so a task pulls in
proportion to its share of the batch, scaled by its `loss_weight`; each task's metrics, weighted
the same way, count its own examples only.
"""

import dataclasses
import re
from typing import Optional

import keras

from bertlayers.layers.classification_head import ClassificationHead
from bertlayers.layers.initializers import bert_initializer
from bertlayers.layers.token_classification_head import TokenClassificationHead
from bertlayers.models.encoder_model import EncoderModel, encoder_inputs

# kind -> (head class, the encoder output it reads)
TASK_KINDS = {
    "classification": (ClassificationHead, "pooled_output"),
    "tagging": (TokenClassificationHead, "sequence_output"),
}
_TASK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


@dataclasses.dataclass(frozen=True)
class Task:
    """One task of a `MultiTask` model.

    Args:
      kind: "classification" (one label an example, from the pooled output) or "tagging" (one
        label a token, from the sequence output).
      num_classes: the labels' count (may be left out when `label_names` is given).
      label_names: the label strings by class id (served as `<task>_label_name`, or tag names).
      loss_weight: the task's weight in the summed loss.
    """

    kind: str
    num_classes: Optional[int] = None
    label_names: Optional[tuple] = None
    loss_weight: float = 1.0

    def __post_init__(self):
        if self.kind not in TASK_KINDS:
            raise ValueError(f"A task's kind is one of {', '.join(TASK_KINDS)}; got {self.kind!r}.")
        if self.label_names is not None:
            object.__setattr__(self, "label_names", tuple(str(n) for n in self.label_names))
            if self.num_classes is None:
                object.__setattr__(self, "num_classes", len(self.label_names))
            if len(self.label_names) != self.num_classes:
                raise ValueError(f"label_names has {len(self.label_names)} names for num_classes={self.num_classes}.")
        if not isinstance(self.num_classes, int) or isinstance(self.num_classes, bool) or self.num_classes < 2:
            raise ValueError(
                f"A task needs num_classes (an integer of at least 2) or label_names; got {self.num_classes!r}."
            )
        if not float(self.loss_weight) > 0:
            raise ValueError(f"loss_weight must be > 0, got {self.loss_weight!r}.")
        object.__setattr__(self, "loss_weight", float(self.loss_weight))


def _task(value):
    return value if isinstance(value, Task) else Task(**value)


@keras.saving.register_keras_serializable(package="bertlayers")
class MultiTask(EncoderModel):
    """One logits output a task, named by the task: `[B, C]` for classification, `[B, S, C]` for
    tagging, each head reading the encoder run once.

    Inputs: the encoder's. Train with labels and sample weights keyed by task name
    (`mix_tasks`); `compile` fills in each task's loss (softmax cross-entropy), its loss weight
    and its accuracy. Exported (`export_for_serving`), every head is served: a classification
    task as `<task>_label` (and `_probabilities`, `_label_name`), a tagging task as `<task>_tags`.

    Args:
      encoder: the shared encoder.
      tasks: {name: `Task` (or its fields as a dict)}; names are identifiers (they name outputs).
      dropout: each head's dropout.
    """

    def __init__(
        self, encoder: keras.Model, tasks: dict, dropout: float = 0.1, name: str = "multi_task", **kwargs
    ) -> None:
        if not tasks:
            raise ValueError("A MultiTask model needs at least one task.")
        tasks = {str(task): _task(spec) for task, spec in tasks.items()}
        for task in tasks:
            if not _TASK_NAME.match(task):
                raise ValueError(
                    f"Task name {task!r}: letters, digits and '_', starting with a letter (it names outputs)."
                )
        inputs = encoder_inputs()
        features = encoder(inputs)  # pooled_output [B, H], sequence_output [B, S, H]
        heads, outputs = {}, {}
        for task, spec in tasks.items():
            head_class, read = TASK_KINDS[spec.kind]
            heads[task] = head_class(
                spec.num_classes,
                dropout=dropout,
                kernel_initializer=bert_initializer(encoder.config.initializer_range),
                dtype=encoder.layer_dtype_policy,
                name=f"{task}_head",
            )
            outputs[task] = heads[task](features[read])  # [B, C] or [B, S, C]
        super().__init__(inputs=inputs, outputs=outputs, name=name, **kwargs)
        self.encoder = encoder
        self.tasks, self.heads = tasks, heads
        self.dropout = float(dropout)
        self.uses_pooled_output = any(spec.kind == "classification" for spec in tasks.values())

    def _constructor_args(self):
        return {"tasks": {task: dataclasses.asdict(spec) for task, spec in self.tasks.items()}, "dropout": self.dropout}

    def logits_outputs(self):
        return list(self.tasks)  # every task's output: classes, or each token's tags

    def default_losses(self):
        return {task: keras.losses.SparseCategoricalCrossentropy(from_logits=True) for task in self.tasks}

    def default_metrics(self):
        return {task: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")] for task in self.tasks}

    def compile(self, optimizer="adam", loss=None, metrics=None, weighted_metrics=None, **kwargs):
        kwargs.setdefault("loss_weights", {task: spec.loss_weight for task, spec in self.tasks.items()})
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, weighted_metrics=weighted_metrics, **kwargs)

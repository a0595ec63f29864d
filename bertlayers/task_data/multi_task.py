"""Several tasks' examples as one training set for `bertlayers.models.MultiTask`.

Each example keeps the labels of its own task; for every other task it gets placeholder labels
(zeros) with sample weight 0, so shuffled batches mix the tasks and each example trains its own
head only.
"""

import numpy as np


def mix_tasks(task_data):
    """{task: (x, labels, sample_weight or None)} → (x, y, sample_weight), each task's examples in
    turn (shuffle when batching).

    Args:
      task_data: per task, encoder inputs `x` ({name: int `[N_t, S]`}, the same `S` for every task),
        `labels` int `[N_t]` (classification) or `[N_t, S]` (tagging), and their sample weights
        (None: all 1; a tagger's are 1 on the labelled pieces).

    Returns:
      x {name: `[N, S]`}, y {task: labels `[N, ...]`} and sample_weight {task: `[N, ...]`}, N = Σ N_t.
    """
    if not task_data:
        raise ValueError("mix_tasks needs at least one task's data.")
    lengths = {task: np.asarray(x["token_ids"]).shape[1] for task, (x, _, _) in task_data.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"Every task's inputs need one sequence length to be batched together; got {lengths}.")
    names = sorted(next(iter(task_data.values()))[0])
    x = {name: np.concatenate([np.asarray(d[0][name]) for d in task_data.values()]).astype("int32") for name in names}
    y, sample_weight = {}, {}
    for task, (_, labels, weights) in task_data.items():
        labels = np.asarray(labels)
        weights = np.ones(labels.shape, "float32") if weights is None else np.asarray(weights, "float32")
        if len(labels) != len(np.asarray(task_data[task][0]["token_ids"])):
            raise ValueError(
                f"Task {task!r}: {len(labels)} labels for {len(task_data[task][0]['token_ids'])} examples."
            )
        if weights.shape != labels.shape:
            raise ValueError(
                f"Task {task!r}: sample weights of shape {weights.shape} for labels of shape {labels.shape}."
            )
        parts_y, parts_w = [], []
        for other, (other_x, _other_labels, _) in task_data.items():
            rows = len(np.asarray(other_x["token_ids"]))
            if other == task:
                parts_y.append(labels.astype("int32"))
                parts_w.append(weights)
            else:
                parts_y.append(np.zeros((rows,) + labels.shape[1:], "int32"))
                parts_w.append(np.zeros((rows,) + labels.shape[1:], "float32"))
        y[task], sample_weight[task] = np.concatenate(parts_y), np.concatenate(parts_w)
    return x, y, sample_weight

"""Charts beside a run's numbers (training curves, a study's rows), where matplotlib is installed
(`pip install bertlayers[charts]`); without it the numbers are written and the chart is not."""

import io
import logging
import math
import os

from bertlayers.utils import atomic_files

logger = logging.getLogger(__name__)


def pyplot():
    """matplotlib's `pyplot` on its file-only backend (Agg: no display needed), or None where
    matplotlib is not installed (logged)."""
    try:
        import matplotlib
    except ImportError:
        logger.info("matplotlib is not installed (pip install matplotlib): no chart.")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(figure, path: str, dpi: int = 110) -> None:
    """Write `figure` as a PNG to `path` atomically (a reader never sees half a file) and close it."""
    buffer = io.BytesIO()
    try:
        figure.savefig(buffer, dpi=dpi, format="png")
    finally:
        pyplot().close(figure)
    atomic_files.write_bytes(path, buffer.getvalue())
    logger.info(f"Chart: {path}")


def training_curves(history: list[dict], path: str) -> bool:
    """A PNG at `path` of a run's `history` (one dict a logged epoch, as `JsonHistory` writes):
    the loss and each metric by epoch, one panel each, training and validation (`val_*`) on the
    same axes. Returns whether it was written (False without matplotlib or epochs)."""
    plt = pyplot()
    names = [
        k for k in dict.fromkeys(k for entry in history for k in entry) if k != "epoch" and not k.startswith("val_")
    ]
    names = [k for k in names if k != "learning_rate"]
    if plt is None or not history or not names:
        return False
    epochs = [entry.get("epoch", index) + 1 for index, entry in enumerate(history)]
    columns = min(len(names), 3)
    rows = math.ceil(len(names) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.2 * rows), squeeze=False)
    for axis, name in zip(axes.flat, names):
        for key, label, style in ((name, "training", "o-"), (f"val_{name}", "validation", "s--")):
            points = [(e, entry[key]) for e, entry in zip(epochs, history) if key in entry]
            if points:
                axis.plot(*zip(*points), style, label=label, markersize=4)
        axis.set_title(name)
        axis.set_xlabel("epoch")
        axis.grid(alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize="small")
    for axis in list(axes.flat)[len(names) :]:
        axis.set_visible(False)
    figure.suptitle(os.path.basename(os.path.dirname(os.path.abspath(path))) or "training")
    figure.tight_layout()
    save_figure(figure, path)
    return True


def seed_spread(
    panels: dict[str, dict[str, list[float]]],
    path: str,
    title: str,
    baselines: dict[str, tuple[str, float]] | None = None,
) -> bool:
    """A PNG at `path` of a study's rows, one panel a measure (`panels`: {axis label: {row: the
    row's scores, one a seed}}): a dot a seed, the bar from the lowest to the highest and a tick at
    the mean, so a difference larger than the seeds' spread shows at a glance. The rows are the
    panels' in their order; a row a panel lacks is left empty there. `baselines` ({axis label:
    (name, score)}, such as the majority class) draws a dashed line in that panel. Returns whether
    it was written (False without matplotlib or rows)."""
    plt = pyplot()
    rows = list(dict.fromkeys(row for scores in panels.values() for row in scores))
    if plt is None or not rows:
        return False
    figure, axes = plt.subplots(
        1, len(panels), figsize=(5.5 * len(panels) + 1, 0.55 * len(rows) + 1.5), sharey=True, squeeze=False
    )
    for axis, (label, scores) in zip(axes[0], panels.items()):
        for y, row in enumerate(rows):
            runs = scores.get(row)
            if not runs:
                continue
            axis.plot([min(runs), max(runs)], [y, y], color="0.6", linewidth=3)
            axis.plot(runs, [y] * len(runs), "o", color="tab:blue")
            axis.plot(sum(runs) / len(runs), y, "|", color="black", markersize=14)
        if label in (baselines or {}):
            name, score = baselines[label]
            axis.axvline(score, color="tab:red", linestyle="--", linewidth=1, label=name)
            axis.legend(fontsize="small", loc="best")
        axis.set_xlabel(label)
        axis.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(range(len(rows)), rows)
    axes[0][0].invert_yaxis()
    gap = " " if len(panels) > 1 else "\n"  # one panel: too narrow for the subtitle on the same line
    figure.suptitle(f"{title}{gap}(dots: seeds; bar: their range; tick: the mean)")
    figure.tight_layout()
    save_figure(figure, path)
    return True


def ensemble_scores(members: list[float], ensemble: float, metric: str, path: str) -> bool:
    """A PNG at `path` of an ensemble's score beside its members' (`metric`, one dot a member,
    their mean and spread marked): whether averaging beats the seeds at a glance. Returns whether
    it was written (False without matplotlib or members)."""
    plt = pyplot()
    if plt is None or not members:
        return False
    rows = [(f"member {index}", [score]) for index, score in enumerate(members)]
    rows += [(f"members' mean ({len(members)})", list(members)), ("ensemble", [ensemble])]
    figure, axis = plt.subplots(figsize=(6.4, 0.45 * len(rows) + 1.4))
    for y, (label, scores) in enumerate(rows):
        if len(scores) > 1:  # the members' spread, and their mean
            axis.plot([min(scores), max(scores)], [y, y], color="0.6", linewidth=3)
            axis.plot(sum(scores) / len(scores), y, "|", color="black", markersize=14)
        else:
            axis.plot(scores, [y], "*" if label == "ensemble" else "o", color="tab:blue", markersize=9)
    axis.set_yticks(range(len(rows)), [label for label, _ in rows])
    axis.invert_yaxis()
    axis.set_xlabel(metric)
    axis.grid(axis="x", alpha=0.3)
    figure.suptitle(os.path.basename(os.path.dirname(os.path.abspath(path))) or "ensemble")
    figure.tight_layout()
    save_figure(figure, path)
    return True

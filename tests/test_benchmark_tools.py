"""The benchmarks' own arithmetic (the scripts are run by hand, never timed in tests): the trace
summary of `benchmarks/device_profile.py`, the repeats of `benchmarks/accelerator.py`, the
ratios and peaks of `benchmarks/compare.py` and the memory split of `benchmarks/serving_memory.py`;
the benchmarks' and the studies' charts."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import accelerator  # noqa: E402
import compare  # noqa: E402
import device_profile  # noqa: E402
import serving_memory  # noqa: E402


def test_trace_summary_counts_the_device_busy_once_where_kernels_overlap():
    """Two streams' kernels overlapping count once toward the busy time; host events are split
    into the runtime's and Python's frames; per-step figures divide by the steps."""
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/host:CPU"}},
        {"ph": "X", "pid": 1, "tid": 1, "name": "gemm", "ts": 0, "dur": 10},
        {"ph": "X", "pid": 1, "tid": 2, "name": "softmax", "ts": 5, "dur": 10},  # overlaps gemm by 5
        {"ph": "X", "pid": 1, "tid": 1, "name": "gemm", "ts": 30, "dur": 10},
        {"ph": "X", "pid": 2, "tid": 1, "name": "PjitFunction(step)", "ts": 0, "dur": 8},
        {"ph": "X", "pid": 2, "tid": 1, "name": "$trainer.py:1 fit", "ts": 0, "dur": 40},
    ]
    summary = device_profile.summarize({"traceEvents": events}, wall_us=50.0, steps=2)
    assert summary["device_busy_us_per_step"] == pytest.approx((15 + 10) / 2)
    assert summary["device_busy_fraction"] == pytest.approx(25 / 50)
    assert summary["kernels_per_step"] == 1.5
    assert summary["top_kernels"][0] == {"name": "gemm", "count": 2, "us_per_step": 10.0}
    assert [e["name"] for e in summary["top_host_events"]] == ["PjitFunction(step)"]
    assert [e["name"] for e in summary["top_python_frames"]] == ["$trainer.py:1 fit"]


def test_repeats_give_the_median_and_the_extremes():
    times = [0.1, 0.2, 0.1, 0.4, 0.1, 0.1, 0.2, 0.1, 0.3, 0.1]  # five repeats of two calls
    found = accelerator.in_repeats(times, lambda chunk: sum(chunk))
    assert found == {"median": pytest.approx(0.3), "min": pytest.approx(0.2), "max": pytest.approx(0.5), "n": 5}
    assert accelerator.rates([0.5, 0.25, 1.0], 10) == {"median": 20.0, "min": 10.0, "max": 40.0, "n": 3}
    assert accelerator.nominal_peak("NVIDIA H100 80GB HBM3") == 989.0 and accelerator.nominal_peak("cpu") is None
    row = {"seq_per_s": 20.0, "seq_per_s_spread": {"min": 10.0, "max": 40.0}}
    assert accelerator.shown(row, "seq_per_s", "{:,.0f}") == "20 (10-40)"


def test_the_long_context_and_packed_charts_draw_what_their_tables_hold(tmp_path, monkeypatch):
    """`--chart` of benchmarks/long_context.py and packed.py: a curve a model and a layer kind, a
    bar a way of batching, from the rows their tables print."""
    import long_context
    import matplotlib.pyplot as plt
    import packed

    rows = [
        {
            "model": "modernbert",
            "length": n,
            "global_layers": 8,
            "seconds": t,
            "block_seconds": {"local": t / 40, "global": t / 10},
        }
        for n, t in ((1024, 0.8), (2048, 2.6))
    ] + [{"model": "full", "length": 1024, "global_layers": 22, "seconds": 1.3, "block_seconds": {"global": 0.05}}]
    drawn = []
    real_plot, real_barh = plt.Axes.plot, plt.Axes.barh
    monkeypatch.setattr(
        plt.Axes, "plot", lambda self, *a, **k: drawn.append((a[:2], k.get("label"))) or real_plot(self, *a, **k)
    )
    long_context.chart(rows, str(tmp_path / "long.png"))
    assert [label for _, label in drawn] == [
        "modernbert (8 global layers)",
        "full (22 global layers)",
        "one local layer",
        "one global layer",
    ]
    assert drawn[0][0] == ([1024, 2048], [0.8, 2.6]) and drawn[3][0] == ([1024, 2048], [0.08, 0.26])
    bars = []
    monkeypatch.setattr(
        plt.Axes, "barh", lambda self, y, w, **k: bars.append((list(y), list(w))) or real_barh(self, y, w, **k)
    )
    results = [
        ("inference", "padded to 128", 100, 2.0),
        ("inference", "packed", 40, 0.5),
        ("fine-tuning", "packed", 40, 1.0),
    ]
    packed.chart(results, {"inference": 100, "fine-tuning": 50}, str(tmp_path / "packed.png"))
    assert bars == [(["padded to 128", "packed"], [50.0, 200.0]), (["packed"], [50.0])]
    assert all((tmp_path / name).read_bytes()[:4] == b"\x89PNG" for name in ("long.png", "packed.png"))


def test_a_workers_peak_memory_is_its_own_not_the_process_that_started_it():
    """compare.py's workers report their own peak: a fresh Python started from this worker (made
    to hold 300 MB more first) reports tens of MB, where getrusage's ru_maxrss, inherited across
    exec on Linux, reports the parent's."""
    import subprocess

    held = bytearray(300 * 2**20)
    held[::4096] = b"\1" * len(held[::4096])  # touched: resident
    code = "import resource, compare; print(compare.peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=os.path.join(ROOT, "benchmarks"), capture_output=True, text=True, check=True
    )
    own, inherited = map(float, done.stdout.split())
    assert compare.peak_rss_mb() > 300 and inherited >= 300, inherited
    assert own < 100, own
    del held


def test_each_bertlayers_row_gets_its_ratio_and_the_best_rows_meet():
    """compare.py's serving ratios: every bertlayers row (the SavedModel, its TFLite file) over the
    fastest peer of its round, column by column (p50 inverted, batch 32); "best of each" sets the
    fastest bertlayers row of any precision against the fastest peer of any precision."""

    def row(precision, library, label, p50, rate):
        return dict(work="serve", precision=precision, library=library, label=label, round=0, p50_ms=p50,
                    batch32_per_s=rate, p99_ms=2 * p50, peak_rss_mb=100.0)  # fmt: skip

    results = [
        row("float32", "bertlayers", "bertlayers", 8.0, 400.0),
        row("float32", "bertlayers", "bertlayers (TFLite)", 4.0, 300.0),
        row("float32", "transformers", "ONNX Runtime", 4.0, 200.0),
        row("int8", "bertlayers", "bertlayers (TFLite)", 1.0, 900.0),
        row("int8", "transformers", "ONNX Runtime", 2.0, 450.0),
    ]
    float32 = [r for r in results if r["precision"] == "float32"]
    assert compare.round_ratios("serve", float32) == [(0.5, 2.0)]
    assert compare.round_ratios("serve", float32, "bertlayers (TFLite)") == [(1.0, 1.5)]
    assert compare.round_ratios("serve", results, None) == [(2.0, 2.0)]  # int8 TFLite against int8 ONNX
    table = compare.table(results)
    assert (
        "| serve | float32 | bertlayers (TFLite) | p50 4.0 ms, p99 8.0 ms, batch 32: 300/s | 1.00x / 1.50x |" in table
    )
    assert "| serve | best of each | bertlayers' fastest row against the fastest peer's | | 2.00x / 2.00x |" in table


def test_the_resident_memory_splits_into_anonymous_and_file_backed_pages():
    """`serving_memory.mapped_mb`'s two parts add up to the resident memory `/proc` reports, and
    the interpreter's own code is among the mapped files."""
    from memory_stages import resident_mb

    parts = serving_memory.mapped_mb()
    resident = resident_mb()[0]
    assert parts["anonymous"] > 0 and parts["file-backed"] > 0
    assert abs(parts["anonymous"] + parts["file-backed"] - resident) <= max(8, resident // 20), (parts, resident)


def test_the_studies_charts_draw_a_panel_a_task_run_and_the_ensemble_beside_its_members(tmp_path, monkeypatch):
    """examples/ablation.py's chart: one panel for each task the study ran (a Rotten Tomatoes-only
    study has no empty SQuAD panel), a dot a fine-tuning seed (`seed_spread`, which examples/elmo.py
    draws too: a row a panel lacks left empty there, a panel's baseline dashed); `ensemble_scores`: a dot a member, the
    members' spread, the ensemble's star."""
    import importlib.util

    import matplotlib.pyplot as plt

    from bertlayers.utils.charts import ensemble_scores, seed_spread

    spec = importlib.util.spec_from_file_location("ablation", os.path.join(ROOT, "examples", "ablation.py"))
    ablation = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ablation)
    made = []
    real_subplots = plt.subplots
    monkeypatch.setattr(plt, "subplots", lambda *a, **k: made.append(a) or real_subplots(*a, **k))
    results = {
        row: {"objective": row, "rotten_tomatoes_accuracy": {"runs": runs}}
        for row, runs in (("roberta_10", [0.72, 0.74, 0.73]), ("roberta", [0.74, 0.75, 0.75]))
    }
    ablation.chart(results, str(tmp_path / "study.png"))
    assert made == [(1, 1)]
    panels = {"accuracy": {"a": [70.0, 71.0], "b": [72.0]}, "F1": {"a": [9.0, 8.0]}}
    majority = {"accuracy": ("majority class", 57.6)}
    assert seed_spread(panels, str(tmp_path / "two.png"), "two tasks", baselines=majority) and made[-1] == (1, 2)
    assert not seed_spread({"accuracy": {}}, str(tmp_path / "none.png"), "nothing")
    assert ensemble_scores([0.75, 0.76], 0.77, "accuracy", str(tmp_path / "ensemble.png"))
    assert all((tmp_path / name).read_bytes()[:4] == b"\x89PNG" for name in ("study.png", "two.png", "ensemble.png"))

"""The benchmarks' own arithmetic (the scripts are run by hand, never timed in tests): the trace
summary of `benchmarks/device_profile.py` and the repeats of `benchmarks/accelerator.py`."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))

import accelerator  # noqa: E402
import device_profile  # noqa: E402


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

"""How much of the suite's time is TensorFlow building graphs: `BERTLAYERS_TRACE_SHARE=1 pytest ...` times
every outermost `func_graph_from_py_func` (the one function that traces each `tf.function`: Keras's
train, test and predict steps, tf.data's map functions, a SavedModel's signatures) in each test's
process, and ends the run with the traced share of the test time and the tests that trace most.

It is the profile behind tests/README.md's "where the time goes": on a 2-core CPU most of a tiny
model's fit is the tracing of its train step, not its steps. Child processes are not counted (their
time shows in their test's duration only)."""

import time

import pytest

_TRACED_S = [0.0]  # this process's tracing time so far (outermost traces only: a nested one is inside it)
_DEPTH = [0]


def _timed(trace):
    def timed_trace(*args, **kwargs):
        _DEPTH[0] += 1
        start = time.perf_counter()
        try:
            return trace(*args, **kwargs)
        finally:
            _DEPTH[0] -= 1
            if _DEPTH[0] == 0:
                _TRACED_S[0] += time.perf_counter() - start

    return timed_trace


_BEFORE = pytest.StashKey[float]()


def register(config):
    """Time the tracing from now on (conftest.py calls this when BERTLAYERS_TRACE_SHARE is set)."""
    from tensorflow.python.framework import func_graph

    # Its callers look it up on the module at each call (func_graph.func_graph_from_py_func).
    func_graph.func_graph_from_py_func = _timed(func_graph.func_graph_from_py_func)
    config.pluginmanager.register(_Hooks(), "trace-share")


class _Hooks:
    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item):
        item.stash[_BEFORE] = _TRACED_S[0]
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        if call.when == "teardown":  # the test's last report carries its tracing to the controlling process
            report = outcome.get_result()
            report.user_properties = [*report.user_properties, ("traced_s", _TRACED_S[0] - item.stash[_BEFORE])]

    def __init__(self):
        self.durations = {}
        self.traced = {}

    def pytest_runtest_logreport(self, report):
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        for name, value in report.user_properties:
            if name == "traced_s":
                self.traced[report.nodeid] = value

    def pytest_terminal_summary(self, terminalreporter):
        total = sum(self.durations.values())
        traced = sum(self.traced.values())
        if not total:
            return
        write = terminalreporter.write_line
        write(f"tracing (tf.function graphs built in the test processes): {traced:.0f} s of {total:.0f} s of test time")
        write(f"({100 * traced / total:.0f}%); the tests that trace most:")
        for nodeid, seconds in sorted(self.traced.items(), key=lambda kv: -kv[1])[:15]:
            write(f"  {seconds:6.1f} s of {self.durations[nodeid]:6.1f} s  {nodeid}")

"""Where the suite's time goes: `BERTLAYERS_TEST_PROFILE=1 pytest ...` times, in each test's process,
the calls that the suite's time is made of, and ends the run with each one's share of the test time
and the tests that spend most in it:

  - tracing: every outermost `func_graph_from_py_func` (the one function that traces each
    `tf.function`: Keras's train, test and predict steps, tf.data's map functions, a SavedModel's
    signatures);
  - fit, predict and evaluate (Keras's `Model` methods; tracing included);
  - SavedModel export and load (`tf.saved_model.save` / `load`), `.keras` save and load;
  - children: the wall time a test waits on a child process (`subprocess`'s `communicate` and
    `wait`), which is the child's start-up (Python, TensorFlow) and work;
  - sleeping (`time.sleep`: polls for a child's progress).

Each figure is inclusive (a fit's tracing is in both), and a nested call of the same kind is
counted once. It is the profile behind tests/README.md's "where the time goes"."""

import functools
import subprocess
import time

import pytest

_SPENT: dict[str, float] = {}  # this process's time so far, by kind
_DEPTH: dict[str, int] = {}


def _timed(kind, call):
    @functools.wraps(call)
    def timed(*args, **kwargs):
        _DEPTH[kind] = _DEPTH.get(kind, 0) + 1
        start = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            _DEPTH[kind] -= 1
            if _DEPTH[kind] == 0:  # outermost only: a nested call is inside it
                _SPENT[kind] = _SPENT.get(kind, 0.0) + time.perf_counter() - start

    return timed


def _patch(owner, name, kind):
    setattr(owner, name, _timed(kind, getattr(owner, name)))


_BEFORE = pytest.StashKey[dict]()


def register(config):
    """Time the calls from now on (conftest.py calls this when BERTLAYERS_TEST_PROFILE is set)."""
    import keras
    import tensorflow as tf
    from keras.src.saving import saving_api
    from tensorflow.python.framework import func_graph

    # Their callers look each up on its module or class at each call.
    _patch(func_graph, "func_graph_from_py_func", "tracing")
    for method in ("fit", "predict", "evaluate"):
        _patch(keras.Model, method, method)
    _patch(tf.saved_model, "save", "SavedModel export")
    _patch(tf.saved_model, "load", "SavedModel load")
    _patch(saving_api, "save_model", ".keras save")
    for owner in (saving_api, keras.saving, keras.models):
        _patch(owner, "load_model", ".keras load")
    _patch(subprocess.Popen, "communicate", "waiting on children")
    _patch(subprocess.Popen, "wait", "waiting on children")
    _patch(time, "sleep", "sleeping")
    config.pluginmanager.register(_Hooks(), "cost-profile")


class _Hooks:
    def __init__(self):
        self.durations = {}
        self.spent = {}  # nodeid: {kind: seconds}

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item):
        item.stash[_BEFORE] = dict(_SPENT)
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        if call.when == "teardown":  # the test's last report carries its figures to the controlling process
            report = outcome.get_result()
            before = item.stash[_BEFORE]
            spent = {kind: seconds - before.get(kind, 0.0) for kind, seconds in _SPENT.items()}
            report.user_properties = [*report.user_properties, ("spent", spent)]

    def pytest_runtest_logreport(self, report):
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        for name, value in report.user_properties:
            if name == "spent":
                self.spent[report.nodeid] = value

    def pytest_terminal_summary(self, terminalreporter):
        total = sum(self.durations.values())
        if not total:
            return
        write = terminalreporter.write_line
        kinds = sorted({kind for spent in self.spent.values() for kind in spent})
        sums = {kind: sum(spent.get(kind, 0.0) for spent in self.spent.values()) for kind in kinds}
        write(f"where the test time goes ({total:.0f} s in all; each figure inclusive):")
        for kind in sorted(kinds, key=lambda k: -sums[k]):
            leaders = sorted(self.spent, key=lambda n: -self.spent[n].get(kind, 0.0))[:5]
            write(f"  {kind:20s} {sums[kind]:7.0f} s ({100 * sums[kind] / total:3.0f}%); most in:")
            for nodeid in leaders:
                write(f"      {self.spent[nodeid].get(kind, 0.0):6.1f} s of {self.durations[nodeid]:6.1f} s  {nodeid}")

"""The suite's budget, held by the suite: a test whose set-up or call runs past the time limit fails
unless it is marked `@pytest.mark.slow(reason="why")`, and the end of a run says what the slow tier
cost. conftest.py takes these hooks; tests/test_testing.py checks them on a deliberately slow test.

The limit is 30 s (`BERTLAYERS_TEST_TIME_LIMIT` sets another): twice the slowest unmarked test on the
2-core AMD EPYC with AVX-512, so that the 2-core AVX2 EPYC, about half as fast, stays inside it."""

import os

import pytest

DEFAULT_LIMIT_S = 30.0


def time_limit_s(config) -> float:
    return float(os.environ.get("BERTLAYERS_TEST_TIME_LIMIT", DEFAULT_LIMIT_S))


def slow_reason(item):
    """The reason a test's `slow` mark gives (`reason=` or its first argument), or None."""
    for mark in item.iter_markers("slow"):
        reason = mark.kwargs.get("reason") or (mark.args[0] if mark.args else None)
        if reason:
            return str(reason)
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    limit = time_limit_s(item.config)
    if report.when in ("setup", "call") and report.passed and report.duration > limit and not slow_reason(item):
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid}: its {report.when} took {report.duration:.1f} s, over the suite's {limit:g} s limit per "
            'test: make it cheaper, or mark it @pytest.mark.slow(reason="why it must take this long").'
        )


class SlowTierTotal:
    """Sums the durations (set-up, call, tear-down) of the tests marked slow, on the controlling
    process (pytest-xdist's workers send their reports there)."""

    def __init__(self):
        self.seconds = 0.0
        self.tests = set()
        self.total = 0.0

    def pytest_runtest_logreport(self, report):
        self.total += report.duration
        if "slow" in report.keywords:
            self.seconds += report.duration
            self.tests.add(report.nodeid)

    def pytest_terminal_summary(self, terminalreporter):
        if self.tests:
            terminalreporter.write_line(
                f"slow tier: {len(self.tests)} tests, {self.seconds:.0f} s of the run's {self.total:.0f} s of test time "
                f"(summed over workers; `make test-fast` leaves them out)"
            )


def register(config):
    config.pluginmanager.register(SlowTierTotal(), "slow-tier-total")

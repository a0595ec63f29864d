"""The suite's own budget (tests/time_limit.py): a deliberately slow test fails the run unless its
`slow` mark says why, and the run ends with the slow tier's total."""

import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))


def _run(tmp_path, mark):
    (tmp_path / "conftest.py").write_text(
        "from time_limit import pytest_runtest_makereport, register  # noqa: F401\n\n\n"
        "def pytest_configure(config):\n    register(config)\n"
    )
    (tmp_path / "test_sleepy.py").write_text(
        textwrap.dedent(
            f"""
            import time
            import pytest

            {mark}
            def test_sleeps_past_the_limit():
                time.sleep(0.3)

            def test_quick():
                pass
            """
        )
    )
    environment = {**os.environ, "PYTHONPATH": HERE, "BERTLAYERS_TEST_TIME_LIMIT": "0.1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "", "-o", "markers=slow", str(tmp_path)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_test_over_the_limit_fails_unless_its_slow_mark_says_why(tmp_path):
    unmarked = _run(tmp_path, "")
    assert unmarked.returncode == 1, unmarked.stdout
    assert "1 failed, 1 passed" in unmarked.stdout
    assert "over the suite's 0.1 s limit per test" in unmarked.stdout
    assert "test_sleeps_past_the_limit" in unmarked.stdout

    without_reason = _run(tmp_path, "@pytest.mark.slow")
    assert without_reason.returncode == 1, without_reason.stdout

    with_reason = _run(tmp_path, '@pytest.mark.slow(reason="sleeps on purpose")')
    assert with_reason.returncode == 0, with_reason.stdout
    assert "slow tier: 1 tests" in with_reason.stdout

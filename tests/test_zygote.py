"""A child forked from the zygote (tests/zygote.py) starts as a fresh Python would, and is the
worker's own: the kill, time-out and multi-process tests rely on both."""

import json
import os
import signal
import subprocess
import sys

import pytest
import zygote
from processes import environment, python, run, start

_REPORT = r"""
import json, os, sys
print("to stderr", file=sys.stderr)
print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(), "parent": os.getppid(),
                  "setting": os.environ.get("ZYGOTE_TEST"), "main": __name__}))
sys.exit(int(sys.argv[1]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the zygote forks on Linux only")
def test_a_forked_child_reads_its_arguments_environment_and_exit_status_as_a_fresh_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = environment(ZYGOTE_TEST="on")
    forked, fresh = (run(python(_REPORT) + ["3", "x"], expect=3, env=env, fresh=f) for f in (False, True))
    assert zygote._ZYGOTES[zygote._startup_key(env)] is not None  # the first came from the zygote
    reports = [json.loads(r.stdout) for r in (forked, fresh)]
    expected = {"argv": ["-c", "3", "x"], "path0": "", "cwd": str(tmp_path), "parent": os.getpid()}
    assert reports[0] == reports[1] == {**expected, "setting": "on", "main": "__main__"}
    assert forked.stderr.endswith("to stderr\n")

    # Killed as any child: the worker waits for it and reads the signal.
    sleeper = start(python("import time; time.sleep(60)"), env=env)
    assert isinstance(sleeper, zygote.Child) and sleeper.poll() is None
    os.kill(sleeper.pid, signal.SIGKILL)
    assert sleeper.wait(timeout=10) == -signal.SIGKILL
    with pytest.raises(subprocess.TimeoutExpired):
        run(python("import time; time.sleep(60)"), env=env, timeout=0.5)

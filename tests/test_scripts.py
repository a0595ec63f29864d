"""The example scripts behave like command-line tools: `--help` prints usage and does no work."""

import glob
import os
import subprocess
import sys

import pytest

from pretraining_fixtures import REPO, environment

SCRIPTS = sorted(glob.glob(os.path.join(REPO, "examples", "*.py")))


@pytest.mark.slow
def test_every_script_answers_help_without_doing_work(tmp_path):
    processes = {
        os.path.basename(script): subprocess.Popen(
            [sys.executable, script, "--help"], cwd=tmp_path, env=environment(), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )
        for script in SCRIPTS
    }
    for name, process in processes.items():
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, (name, err[-2000:])
        assert out.startswith("usage: "), (name, out[:200])
    assert len(processes) >= 12 and os.listdir(tmp_path) == []  # nothing written

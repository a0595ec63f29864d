"""The example scripts behave like command-line tools: `--help` prints usage and does no work."""

import contextlib
import glob
import io
import os
import runpy
import sys

import pytest

from processes import REPO

SCRIPTS = sorted(glob.glob(os.path.join(REPO, "examples", "*.py")))


@pytest.mark.parametrize("script", SCRIPTS, ids=os.path.basename)
def test_every_script_answers_help_without_doing_work(script, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [script, "--help"])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.raises(SystemExit) as exit:
        runpy.run_path(script, run_name="__main__")  # in this process: TensorFlow is loaded once
    assert exit.value.code == 0
    assert printed.getvalue().startswith("usage: ")
    assert os.listdir(tmp_path) == []  # nothing written

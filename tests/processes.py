"""The one way the tests start another process: an example script or a Python snippet, in
the environment the suite gives every child (quiet TensorFlow, no GPU, unbuffered output)."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def environment(**extra):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def script(name, *args):
    """The command running examples/`name` with `args`."""
    return [sys.executable, os.path.join(REPO, "examples", name), *map(str, args)]


def python(code):
    """The command running the Python source `code`."""
    return [sys.executable, "-c", code]


def run(command, expect=0, timeout=300, env=None):
    """Run `command` to its end; its exit status must be `expect` (None: any). Output is captured as text."""
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env or environment())
    if expect is not None:
        assert result.returncode == expect, (
            f"exit {result.returncode}, expected {expect}: {' '.join(command)[:300]}\n"
            + result.stdout[-3000:]
            + result.stderr[-3000:]
        )
    return result


def start(command, env=None, output=False):
    """Start `command` without waiting; `output`: stdout and stderr piped (text), else discarded."""
    stream = subprocess.PIPE if output else subprocess.DEVNULL
    return subprocess.Popen(command, env=env or environment(), stdout=stream, stderr=stream, text=True)


def run_script(name, *args, timeout=300):
    """Run examples/`name` with `args` to a successful end; its standard output."""
    return run(script(name, *args), timeout=timeout).stdout

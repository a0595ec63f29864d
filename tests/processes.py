"""The one way the tests start another process: an example script or a Python snippet, in
the environment the suite gives every child (quiet TensorFlow, no GPU, unbuffered output)."""

import contextlib
import io
import logging
import os
import runpy
import socket
import subprocess
import sys

import zygote

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def environment(**extra):
    """This process's environment for a child, with `extra` set; XLA_FLAGS given are added to the
    ones the suite sets (conftest.py)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONUNBUFFERED="1")
    flags = extra.pop("XLA_FLAGS", "")
    env.update(extra)
    if flags:
        env["XLA_FLAGS"] = " ".join(filter(None, (env.get("XLA_FLAGS", ""), flags)))
    return env


def script(name, *args):
    """The command running examples/`name` with `args`."""
    return [sys.executable, os.path.join(REPO, "examples", name), *map(str, args)]


def python(code):
    """The command running the Python source `code`."""
    return [sys.executable, "-c", code]


def run(command, expect=0, timeout=300, env=None, fresh=False):
    """Run `command` to its end; its exit status must be `expect` (None: any). Output is captured as
    text. `fresh`: in a Python started anew, never a fork of the zygote (`start`)."""
    child = start(command, env=env, output=True, fresh=fresh)
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    finally:
        child.kill()
        for stream in (child.stdout, child.stderr):
            stream.close()
    result = subprocess.CompletedProcess(command, child.returncode, stdout, stderr)
    if expect is not None:
        assert result.returncode == expect, (
            f"exit {result.returncode}, expected {expect}: {' '.join(command)[:300]}\n"
            + result.stdout[-3000:]
            + result.stderr[-3000:]
        )
    return result


def start(command, env=None, output=False, fresh=False):
    """Start `command` without waiting; `output`: stdout and stderr piped (text), else discarded.

    An example script or `python -c` code starts as a fork of a Python that has loaded TensorFlow
    already (tests/zygote.py: the same child, without its seconds of start-up), unless `fresh`, or
    its environment changes how Python or TensorFlow start."""
    env = env or environment()
    child = None if fresh else zygote.spawn(command, env, output)
    if child is not None:
        return child
    stream = subprocess.PIPE if output else subprocess.DEVNULL
    return subprocess.Popen(command, env=env or environment(), stdout=stream, stderr=stream, text=True)


def run_script(name, *args, timeout=300, process=False):
    """Run examples/`name` with `args` to a successful end; its standard output.

    In this process by default (the script's `__main__` through runpy, as `python examples/name`
    runs it: its folder first on sys.path, its argv, its progress on stdout), so that TensorFlow
    and the library load once a worker, not once a run; what a run leaves in the process (the
    progress handler, the folders it made and claimed) is undone after it. `process=True` starts a
    child instead: where the process is the thing tested, or the run needs a fresh TensorFlow
    (`--num_cpu_devices`, another backend). test_scripts.py proves each script's command line."""
    if process:
        return run(script(name, *args), timeout=timeout).stdout
    return script_result(name, *args).stdout


def script_result(name, *args, expect=0):
    """Run examples/`name` with `args` in this process (see `run_script`); its exit status must be
    `expect`. A `subprocess.CompletedProcess` with what it printed on stdout and stderr."""
    from bertlayers.utils import atomic_files

    path = script(name)[1]
    saved_argv, saved_path = sys.argv, sys.path[:]
    logger = logging.getLogger("bertlayers")
    saved_handlers, saved_level, saved_propagate = logger.handlers[:], logger.level, logger.propagate
    saved_claims, saved_made = set(atomic_files._CLAIMS), atomic_files._MADE[:]
    printed, errors = io.StringIO(), io.StringIO()
    sys.argv = [path, *map(str, args)]
    sys.path.insert(0, os.path.dirname(path))
    # The script adds its progress handler, on this run's stdout, only where none is there yet: one
    # an earlier in-process caller left would take this run's progress elsewhere.
    logger.handlers = [h for h in saved_handlers if not getattr(h, "_bertlayers_progress", False)]
    status = 0
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(errors):
            runpy.run_path(path, run_name="__main__")
    except SystemExit as exit:
        status = 0 if exit.code is None else exit.code
    finally:
        command = " ".join(sys.argv)[:300]
        sys.argv, sys.path[:] = saved_argv, saved_path
        logger.handlers, logger.level, logger.propagate = saved_handlers, saved_level, saved_propagate
        for key in set(atomic_files._CLAIMS) - saved_claims:
            atomic_files.release(key)
        atomic_files._MADE[:] = saved_made
    assert status == expect, (
        f"exit {status}, expected {expect}: {command}\n{printed.getvalue()[-3000:]}{errors.getvalue()[-3000:]}"
    )
    return subprocess.CompletedProcess([path, *args], status, printed.getvalue(), errors.getvalue())


def free_ports(count):
    """`count` TCP ports free on 127.0.0.1 a moment ago."""
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def run_together(command, environments, timeout=300):
    """Run `command` once per environment, all at once (the workers of one run), to a successful
    end; their outputs (stdout and stderr), in order."""
    workers = [start(command, env=env, output=True) for env in environments]
    try:
        outputs = ["".join(w.communicate(timeout=timeout)) for w in workers]
    finally:
        for w in workers:
            w.kill()
    for worker, output in zip(workers, outputs):
        assert worker.returncode == 0, output[-3000:]
    return outputs


def jax_processes(count, port):
    """The environments of `count` JAX processes joined through Keras's KERAS_DISTRIBUTION_*
    variables, process 0 coordinating on 127.0.0.1:`port`."""
    return [
        environment(
            KERAS_BACKEND="jax",
            KERAS_DISTRIBUTION_JOB_ADDRESSES=f"127.0.0.1:{port}",
            KERAS_DISTRIBUTION_NUM_PROCESSES=str(count),
            KERAS_DISTRIBUTION_PROCESS_ID=str(index),
        )
        for index in range(count)
    ]

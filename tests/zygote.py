"""Test children forked from a Python that has loaded TensorFlow already.

A child process used to pay a TensorFlow start-up before doing anything (about 4 s of CPU on the
2-core EPYC, for some ninety children a run: a fifth of what the children cost). A zygote, one per
test worker and per start-up environment, imports TensorFlow (which loads Keras and JAX with it)
once, and forks each child from there: before any TensorFlow or JAX runtime exists (no device,
thread pool, session or XLA client yet), so the child sets its devices, strategy, cluster and
distribution from its environment as a fresh Python does, and it is still a process of its own,
killed, waited for and read as one. The zygote forks twice and the worker is a child subreaper
(prctl), so the child is re-parented to the worker, which waits for it as for a child of its own.

Taken only where a child would start the same way: an example script, a console script of the
environment or `python -c` code, in an environment equal to the zygote's in what Python,
TensorFlow, Keras and JAX read as they load (`STARTUP_PREFIXES`). Other children (other
interpreter options, a poisoned path, TensorFlow kept out: `fresh=True`) start a fresh Python as
before. Linux only; elsewhere every child is fresh.
"""

import atexit
import ctypes
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time

# What a Python reads from the environment as it starts and loads TensorFlow, Keras and JAX: a child
# whose environment differs in one of these starts fresh (the rest is read when used, in the child).
STARTUP_PREFIXES = (
    "PYTHON",
    "TF_CPP_",
    "TF_ENABLE_ONEDNN_OPTS",
    "KERAS_BACKEND",
    "KERAS_HOME",
    "JAX_",
    "LD_",
    "OMP_",
    "MALLOC_",
)
_PR_SET_CHILD_SUBREAPER, _PR_SET_PDEATHSIG = 36, 1
_ZYGOTES = {}  # start-up key -> (process, socket address); None where one failed to start
_START_TIMEOUT_S = 120


def _startup_key(env):
    os_defaults = {"TF_ENABLE_ONEDNN_OPTS": "1"}  # bertlayers sets it before loading TensorFlow
    values = {**os_defaults, **{k: v for k, v in env.items() if k.startswith(STARTUP_PREFIXES)}}
    return tuple(sorted(values.items()))


def _prctl(option, value):
    return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0


def _zygote(env):
    key = _startup_key(env)
    if _ZYGOTES.get(key) is not None and _ZYGOTES[key][0].poll() is not None:  # it died: start another
        _ZYGOTES.pop(key)[0].stdout.close()
    if key not in _ZYGOTES:
        _ZYGOTES[key] = None
        if sys.platform.startswith("linux") and _prctl(_PR_SET_CHILD_SUBREAPER, 1):
            address = os.path.join(tempfile.mkdtemp(prefix="zygote-"), "socket")
            process = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), address],
                env={**env, "TF_ENABLE_ONEDNN_OPTS": dict(key)["TF_ENABLE_ONEDNN_OPTS"]},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            ready = selectors.DefaultSelector()
            ready.register(process.stdout, selectors.EVENT_READ)
            if ready.select(_START_TIMEOUT_S) and process.stdout.readline() == b"ready\n":
                _ZYGOTES[key] = (process, address)
            else:
                process.kill()
    return _ZYGOTES[key]


def spawn(command, env, output):
    """`command` (`[sys.executable, script or "-c", ...]`) started as a fork of the zygote for
    `env`: a `Child`; None where it has to start fresh. `output`: stdout and stderr piped (text),
    else discarded."""
    if len(command) < 2 or command[0] != sys.executable or not (command[1] == "-c" or _script(command[1])):
        return None
    zygote = _zygote(env)
    if zygote is None:
        return None
    pipes = [os.pipe() for _ in range(2)] if output else None
    ends = [w for _, w in pipes] if output else [os.open(os.devnull, os.O_WRONLY)] * 2
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as request:
        json.dump({"argv": [str(a) for a in command[1:]], "env": env, "cwd": os.getcwd()}, request)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(zygote[1])
            socket.send_fds(connection, [request.name.encode()], list(dict.fromkeys(ends)))
            reply = connection.makefile("rb").read().decode().split()
    finally:
        os.unlink(request.name)
        for end in set(ends):
            os.close(end)
    # The child's pid, then "reaped" once the zygote's intermediate process is gone: the child is
    # the worker's from then on.
    assert len(reply) == 2 and reply[1] == "reaped", f"the zygote did not start {command[:3]}: {reply}"
    readers = [os.fdopen(r, "r", encoding="utf-8", errors="replace") for r, _ in pipes] if output else [None, None]
    return Child(int(reply[0]), command, *readers)


def _script(path):
    """Whether `path` is a Python script a fork runs as `python path` would: an example script, or a
    console script of this Python's environment (TensorFlow's `saved_model_cli`)."""
    return path.endswith(".py") or os.path.dirname(os.path.abspath(path)) == os.path.dirname(sys.executable)


class Child:
    """The parts of `subprocess.Popen` the tests use, for a child the zygote forked."""

    def __init__(self, pid, args, stdout, stderr):
        self.pid, self.args, self.stdout, self.stderr = pid, args, stdout, stderr
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout=None):
        if timeout is None and self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.01)
        return self.returncode

    def send_signal(self, number):
        if self.poll() is None:
            os.kill(self.pid, number)

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout=None):
        """Read stdout and stderr to their ends, then wait: (stdout, stderr)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        streams = [s for s in (self.stdout, self.stderr) if s is not None]
        texts = {id(s): [] for s in streams}
        with selectors.DefaultSelector() as selector:
            for stream in streams:
                selector.register(stream.fileno(), selectors.EVENT_READ, stream)
            while selector.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout)
                for key, _ in selector.select(left):
                    data = os.read(key.fd, 1 << 16)
                    if data:
                        texts[id(key.data)].append(data)
                    else:
                        selector.unregister(key.fd)
        self.wait(None if deadline is None else max(deadline - time.monotonic(), 0.01))
        out = [
            b"".join(texts[id(s)]).decode("utf-8", "replace") if s is not None else None
            for s in (self.stdout, self.stderr)
        ]
        for stream in streams:
            stream.close()
        return tuple(out)


@atexit.register
def _stop():
    for zygote in _ZYGOTES.values():
        if zygote is not None:
            zygote[0].kill()
            zygote[0].wait()
            zygote[0].stdout.close()


def _serve(address):
    """The zygote: TensorFlow loaded, then a fork of this process for each request."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # gone with its test worker
    import tensorflow  # noqa: F401  (with Keras and JAX, as TensorFlow loads them)
    from lighter_grappler import leave_out_gpu_passes

    leave_out_gpu_passes()  # as in the test workers (a Python setting: no TensorFlow runtime yet)

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(8)
    print("ready", flush=True)
    while True:
        connection, _ = listener.accept()
        message, fds, _, _ = socket.recv_fds(connection, 4096, 2)
        with open(message.decode()) as f:
            request = json.load(f)
        intermediate = os.fork()
        if intermediate == 0:
            intermediate_pid = os.getpid()
            child = os.fork()
            if child == 0:
                listener.close()
                connection.close()
                while os.getppid() == intermediate_pid:  # run once it is the worker's child, as a fresh one is
                    time.sleep(0.001)
                _become(request, fds[0], fds[-1])
            connection.sendall(f"{child}\n".encode())
            os._exit(0)
        for fd in fds:
            os.close(fd)
        os.waitpid(intermediate, 0)
        connection.sendall(b"reaped\n")
        connection.close()


def _become(request, stdout, stderr):
    """Run the request's script or code in this (forked) process as `python ARGV` would, and exit."""
    import random
    import runpy
    import threading
    import traceback

    os.dup2(stdout, 1)
    os.dup2(stderr, 2)
    for fd in {stdout, stderr}:
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    random.seed()  # a fresh Python's seeds are its own, not the zygote's
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    argv = request["argv"]
    status = 0
    try:
        if argv[0] == "-c":
            sys.argv, sys.path[0] = ["-c", *argv[2:]], ""
            exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        else:
            sys.argv, sys.path[0] = argv, os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exit:
        if exit.code is None or isinstance(exit.code, int):
            status = exit.code or 0
        else:
            print(exit.code, file=sys.stderr)
            status = 1
    except BaseException:
        traceback.print_exc()
        status = 1
    # What Python does as it ends: wait for the threads that are not daemons, run atexit's functions,
    # flush the streams.
    try:
        threading._shutdown()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)


if __name__ == "__main__":
    _serve(sys.argv[1])

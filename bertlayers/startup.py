"""Loading TensorFlow: only where it is used, without its start-up noise, and with oneDNN's graph
rewrites on.

The layers, networks and models are written in `keras.ops` and run on any Keras backend; the
data pipelines (tf.data, tensorflow-text), SavedModel export and tf.distribute need TensorFlow.
Under another backend (`KERAS_BACKEND=jax`) bertlayers imports TensorFlow only if it is
installed, for those parts, and keeps it off the accelerator; without it, they say so by name
(`require_tensorflow`) when imported.

TensorFlow's C++ start-up log reads as a problem where there is none: on every machine
without a GPU it reports the missing CUDA drivers, some of it at ERROR level ("failed call to
cuInit"), and part of it is written before its log level can be set. Importing bertlayers
first keeps that off the screen; `BERTLAYERS_VERBOSE=1` shows it again.

TensorFlow turns its oneDNN rewrites (fused MatMul + BiasAdd, oneDNN matmuls and softmax) on by
default only where the CPU has AVX-512 VNNI, AVX-512 BF16 or AMX. On an AVX2-only CPU they are
off, yet they serve and fine-tune faster there (at some cost to batch-1 latency: the figures and
their commands are in docs/performance.md), so bertlayers turns them on unless
`TF_ENABLE_ONEDNN_OPTS` is already set. TensorFlow reads the
variable once, when it loads: importing tensorflow before bertlayers keeps its own default.
"""

import functools
import importlib
import json
import os
import sys

INSTALL_HINT = "pip install tensorflow==2.21.0 tensorflow-text==2.21.1"


def backend_name():
    """Keras's backend, read as Keras reads it, without importing Keras: under TensorFlow that
    import loads TensorFlow, which must wait for the settings below."""
    if "keras" in sys.modules:
        return sys.modules["keras"].backend.backend()
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    try:
        with open(os.path.join(home, "keras.json")) as file:
            return json.load(file).get("backend", "tensorflow")
    except (OSError, ValueError):
        return "tensorflow"


def backend_is_tensorflow():
    """Whether Keras runs on TensorFlow (read without importing Keras)."""
    return backend_name() == "tensorflow"


@functools.cache
def tensorflow_available():
    """Whether TensorFlow can be imported (imported quietly, once, if so)."""
    try:
        import_tensorflow_quietly()
    except ModuleNotFoundError as error:
        if error.name is None or error.name.split(".")[0] != "tensorflow":
            raise
        return False
    return True


def require_tensorflow(what):
    """TensorFlow, for `what` (a part of bertlayers that needs it); a ModuleNotFoundError naming
    that part and the install command where TensorFlow is not installed."""
    if not tensorflow_available():
        raise ModuleNotFoundError(
            f"{what} needs TensorFlow, which is not installed ({INSTALL_HINT}). Under "
            f"KERAS_BACKEND={backend_name()} the layers, encoders and models work without it.",
            name="tensorflow",
        )
    return sys.modules["tensorflow"]


def import_tensorflow_quietly():
    """Import TensorFlow with oneDNN's rewrites on and its C++ start-up messages silenced (a
    no-op once it is loaded)."""
    if "tensorflow" in sys.modules:
        return
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    if os.environ.get("BERTLAYERS_VERBOSE"):
        _keep_off_accelerators(importlib.import_module("tensorflow"))
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # Messages logged before absl is initialized ignore TF_CPP_MIN_LOG_LEVEL: hide stderr itself
    # while TensorFlow loads. A failing import still raises, and its traceback prints afterwards.
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            tf = importlib.import_module("tensorflow")
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    _keep_off_accelerators(tf)


def _keep_off_accelerators(tf):
    """Under another backend TensorFlow only feeds data (tf.data on the host): left to itself it
    would claim every GPU's memory the first time it runs an op, beside JAX's."""
    if not backend_is_tensorflow():
        tf.config.set_visible_devices([], "GPU")

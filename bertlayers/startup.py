"""Loading TensorFlow without its start-up noise.

TensorFlow's C++ start-up log reads as a problem where there is none: on every machine
without a GPU it reports the missing CUDA drivers, some of it at ERROR level ("failed call to
cuInit"), and part of it is written before its log level can be set. Importing bertlayers
first keeps that off the screen; `BERTLAYERS_VERBOSE=1` shows it again.
"""

import os
import sys


def import_tensorflow_quietly():
    """Import TensorFlow with its C++ start-up messages silenced (a no-op once it is loaded)."""
    if "tensorflow" in sys.modules or os.environ.get("BERTLAYERS_VERBOSE"):
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # Messages logged before absl is initialized ignore TF_CPP_MIN_LOG_LEVEL: hide stderr itself
    # while TensorFlow loads. A failing import still raises, and its traceback prints afterwards.
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            import tensorflow  # noqa: F401
    finally:
        os.dup2(saved, 2)
        os.close(saved)

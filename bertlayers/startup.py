"""Loading TensorFlow: without its start-up noise, and with oneDNN's graph rewrites on.

TensorFlow's C++ start-up log reads as a problem where there is none: on every machine
without a GPU it reports the missing CUDA drivers, some of it at ERROR level ("failed call to
cuInit"), and part of it is written before its log level can be set. Importing bertlayers
first keeps that off the screen; `BERTLAYERS_VERBOSE=1` shows it again.

TensorFlow turns its oneDNN rewrites (fused MatMul + BiasAdd, oneDNN matmuls and softmax) on by
default only where the CPU has AVX-512 VNNI, AVX-512 BF16 or AMX. On an AVX2-only CPU they are
off, yet they serve the MiniLM classifier 1.34x faster at batch 32 there and fine-tune it faster
(at some cost to batch-1 latency: benchmarks/README.md), so bertlayers turns them on unless
`TF_ENABLE_ONEDNN_OPTS` is already set. TensorFlow reads the
variable once, when it loads: importing tensorflow before bertlayers keeps its own default.
"""

import importlib
import os
import sys


def import_tensorflow_quietly():
    """Import TensorFlow with oneDNN's rewrites on and its C++ start-up messages silenced (a
    no-op once it is loaded)."""
    if "tensorflow" in sys.modules:
        return
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    if os.environ.get("BERTLAYERS_VERBOSE"):
        importlib.import_module("tensorflow")
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # Messages logged before absl is initialized ignore TF_CPP_MIN_LOG_LEVEL: hide stderr itself
    # while TensorFlow loads. A failing import still raises, and its traceback prints afterwards.
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            importlib.import_module("tensorflow")
    finally:
        os.dup2(saved, 2)
        os.close(saved)

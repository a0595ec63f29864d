"""SavedModels called as TF Serving calls them: in a Python without Keras, keras-hub or
bertlayers (poisoned packages first on its path make importing them fail), with only
tensorflow-text's kernels for the text models.

One such child per kind (ids, text) and test worker, started on the first call and fed a request a
line, answers every call of the run: a fresh Python a call cost a TensorFlow start-up each
(seconds), and the property checked is the same: after each call the child holds no Keras module.
The ids child never loads tensorflow-text's kernels, so an ids model that needed them fails there."""

import atexit
import functools
import json
import os
import select
import shutil
import subprocess
import tempfile

import numpy as np
from processes import environment, python

TIMEOUT_S = 180
_SERVER = r"""
import glob, importlib.util, json, sys, traceback
import numpy as np
import tensorflow as tf

if sys.argv[1] == "text":
    # tensorflow-text's kernels only (its Python package would import keras), as a server links them.
    folder = importlib.util.find_spec("tensorflow_text").submodule_search_locations[0]
    for library in sorted(glob.glob(folder + "/python/ops/*.so")):
        tf.load_op_library(library)
for line in sys.stdin:
    request = json.loads(line)
    try:
        loaded = tf.saved_model.load(request["path"])
        inputs = dict(np.load(request["inputs"]))
        outputs = loaded.signatures[request["signature"]](**{k: tf.constant(v) for k, v in inputs.items()})
        np.savez(
            request["outputs"],
            **{k: v.numpy().astype("S") if v.dtype == tf.string else v.numpy() for k, v in outputs.items()},
        )
        imported = [m for m in sys.modules if m.split(".")[0] in ("keras", "keras_hub", "keras_nlp", "bertlayers")]
        assert not imported, f"imported while serving: {imported[:5]}"
        reply = {"ok": True}
    except Exception:
        reply = {"ok": False, "error": traceback.format_exc()}
    print(json.dumps(reply), flush=True)
"""
_CHILDREN = {}


@functools.cache
def poisoned_path():
    """A folder of packages that fail to import: Keras, keras-hub, keras-nlp, bertlayers; one per
    test worker, removed when it exits."""
    folder = tempfile.mkdtemp(prefix="poisoned-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for package in ("keras", "keras_hub", "keras_nlp", "bertlayers"):
        os.makedirs(os.path.join(folder, package))
        with open(os.path.join(folder, package, "__init__.py"), "w") as f:
            f.write(f"raise ImportError('{package} is not available when serving')\n")
    return folder


def _child(kind):
    child = _CHILDREN.get(kind)
    if child is None or child.poll() is not None:
        errors = tempfile.TemporaryFile(mode="w+")
        child = subprocess.Popen(
            python(_SERVER) + [kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env=environment(PYTHONPATH=poisoned_path()),
        )
        child.errors = errors
        _CHILDREN[kind] = child
    return child


def run_fresh(path, signature, inputs, tmp_path, text):
    """Call `signature` of the SavedModel at `path` with `inputs` ({name: array}) in the Python
    without Keras of its kind (`text`: tensorflow-text's kernels loaded); its outputs."""
    np.savez(tmp_path / "inputs.npz", **inputs)
    child = _child("text" if text else "ids")
    request = {"path": str(path), "signature": signature, "inputs": str(tmp_path / "inputs.npz")}
    child.stdin.write(json.dumps({**request, "outputs": str(tmp_path / "outputs.npz")}) + "\n")
    child.stdin.flush()
    ready, _, _ = select.select([child.stdout], [], [], TIMEOUT_S)
    line = child.stdout.readline() if ready else ""
    if not line:
        child.kill()
        child.errors.seek(0)
        raise AssertionError(f"the serving child gave no answer in {TIMEOUT_S} s:\n{child.errors.read()[-3000:]}")
    reply = json.loads(line)
    assert reply["ok"], reply["error"]
    return dict(np.load(tmp_path / "outputs.npz"))


@atexit.register
def _stop():
    for child in _CHILDREN.values():
        child.kill()

"""Every Keras internal the library uses is listed in `bertlayers.backend` and still there; the
backend's name is tested in that module alone. A new Keras release fails the version test, so
that each internal is read again against it (and `KERAS_CHECKED` moved)."""

import ast
import os
import re

import keras
import numpy as np
import pytest

from bertlayers import backend

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bertlayers")


def test_keras_is_the_release_the_internals_were_checked_against():
    assert keras.__version__ == backend.KERAS_CHECKED, (
        f"Keras {keras.__version__} is installed; bertlayers.backend.KERAS_INTERNALS were read against "
        f"{backend.KERAS_CHECKED}: check each one in the new release, then move KERAS_CHECKED."
    )


@pytest.mark.parametrize("owner, name, where, why", backend.KERAS_INTERNALS, ids=lambda v: str(v)[:50])
def test_each_listed_internal_is_there(owner, name, where, why):
    name, _, kind = name.partition("@")
    for used_in in where.split(", "):
        assert os.path.isfile(os.path.join(ROOT, used_in)), f"{used_in} (listed for {owner}.{name}) does not exist"
    if kind == "runtime":  # set while a loop runs: exercised by the tests of its user
        return
    target = backend._resolve(owner)
    if kind == "functional":
        inputs = {"ids": keras.Input((None,), name="ids")}
        target = keras.Model(inputs, keras.layers.Dense(2)(inputs["ids"][..., None]))
        assert backend.input_structure(target) == inputs
    elif kind == "built":  # an attribute a layer sets when it builds
        target = target(2)
        target.build((None, 3))
    elif kind == "variable":
        target = keras.Variable(np.zeros(2, "float32"))
    elif kind == "instance":
        target = target(learning_rate=1e-3)
        target.build([keras.Variable(np.zeros(2, "float32"))])
    assert hasattr(target, name), f"Keras {keras.__version__} has no {owner}.{name} ({why})"


def private_keras_names(tree):
    """Keras's private names a module reads, calls or overrides: `keras.src` imports, and the
    private attributes and methods of Keras classes listed in `KERAS_INTERNALS`."""
    listed = {entry[1].split("@")[0] for entry in backend.KERAS_INTERNALS}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("keras.src"):
            found.append(node.module)
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and node.attr in listed:
            found.append(node.attr)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and re.fullmatch(r"keras\.src\..*", node.value)
        ):
            found.append(node.value)
    return found


def test_keras_internals_and_backend_checks_are_in_the_backend_module_only():
    outside = []
    for folder, _, files in os.walk(ROOT):
        for file in sorted(files):
            path = os.path.join(folder, file)
            if not file.endswith(".py") or path == os.path.join(ROOT, "backend.py"):
                continue
            source = open(path, encoding="utf-8").read()
            where = os.path.relpath(path, ROOT)
            outside += [f"{where}: keras.backend.backend()" for _ in re.findall(r"keras\.backend\.backend\(\)", source)]
            outside += [
                f"{where}: {name}" for name in private_keras_names(ast.parse(source)) if name.startswith("keras.src")
            ]
            # A listed internal's user must be named in its entry.
            for name in private_keras_names(ast.parse(source)):
                entries = [e for e in backend.KERAS_INTERNALS if e[1].split("@")[0] == name]
                if entries and not any(where in e[2] for e in entries) and not _overrides(source, name):
                    outside.append(f"{where}: {name} (not listed as used there)")
    assert not outside, "Keras's backend or internals outside bertlayers/backend.py:\n" + "\n".join(outside)


def _overrides(source, name):
    return f"def {name}(" in source


def test_an_unlisted_internal_is_refused():
    with pytest.raises(KeyError, match="keras.Model._private_thing is not a listed Keras internal"):
        backend.internal("keras.Model", "_private_thing")

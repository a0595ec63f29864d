"""What importing bertlayers does to TensorFlow's start-up (each case in a fresh process: the
settings are read once, when TensorFlow loads), and that the scripts import it first. The rest
of the suite imports Keras first, so it runs under TensorFlow's own default for the machine."""

import ast
import functools
import glob
import json
import os

import numpy as np
import pytest
from processes import python, run

# Reports the oneDNN setting, and the outputs of a small fixed-seed encoder on fixed inputs,
# eager and as a graph (with the fused kernels TensorFlow's optimizer made of the graph).
_REPORT = """
import json, os
import bertlayers
import keras, numpy as np, tensorflow as tf
from tensorflow.python.eager import context
from tensorflow.python.util import _pywrap_util_port
keras.utils.set_random_seed(0)
encoder = bertlayers.BertEncoder(vocabulary_size=100, hidden_size=32, num_layers=2, num_heads=4,
                                 intermediate_size=64, max_sequence_length=16)
rng = np.random.default_rng(0)
inputs = {"token_ids": rng.integers(1, 100, (3, 11)).astype("int32"),
          "segment_ids": np.zeros((3, 11), "int32"),
          "padding_mask": np.array([[1] * 11, [1] * 7 + [0] * 4, [1] * 3 + [0] * 8], "int32")}
outputs = encoder(inputs)["sequence_output"]
context.enable_run_metadata()
graph_outputs = tf.function(lambda x: encoder(x)["sequence_output"])(inputs)
graphs = context.export_run_metadata().function_graphs
fused = sorted({(node.op, *(op.decode() for op in node.attr["fused_ops"].list.s))
                for graph in graphs for part in graph.partition_graphs for node in part.node
                if "fused_ops" in node.attr})
print(json.dumps({"setting": os.environ.get("TF_ENABLE_ONEDNN_OPTS"), "onednn": _pywrap_util_port.IsMklEnabled(),
                  "outputs": np.asarray(outputs).tolist(), "graph_outputs": np.asarray(graph_outputs).tolist(),
                  "fused": fused}))
"""


@functools.cache  # each report is a fresh TensorFlow process: made once, read by every test
def _report(setting):
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    if setting is not None:
        env["TF_ENABLE_ONEDNN_OPTS"] = setting
    done = run(python(_REPORT), env=env, fresh=True)  # what a Python does as it starts
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_onednn_rewrites_are_on_unless_the_user_chose_and_change_no_result():
    default, declined = _report(None), _report("0")
    assert (default["setting"], default["onednn"]) == ("1", True)
    assert (declined["setting"], declined["onednn"]) == ("0", False)
    np.testing.assert_allclose(default["outputs"], declined["outputs"], atol=1e-5)
    for report in (default, declined):
        np.testing.assert_allclose(report["graph_outputs"], report["outputs"], atol=1e-5)


@pytest.mark.slow(reason="two fresh TensorFlow processes, with the rewrites on and off")
def test_feed_forward_runs_as_one_fused_kernel_per_layer():
    """The feed-forward network's first dense layer, its bias and its exact GELU become one
    oneDNN kernel in a graph (`on_token_rows` makes them 2-D MatMuls, which is what
    TensorFlow's optimizer fuses); with the rewrites off, MatMul and bias still fuse."""
    default, declined = _report(None), _report("0")
    assert ["_MklNativeFusedMatMul", "BiasAdd", "GeluExact"] in default["fused"]
    assert ["_FusedMatMul", "BiasAdd"] in declined["fused"]


# Modules whose import loads TensorFlow under Keras's default backend.
_LOADS_TENSORFLOW = {"keras", "keras_hub", "keras_nlp", "tensorflow", "tensorflow_text"}
_REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _imported(node):
    """The top-level package names an import statement imports."""
    if isinstance(node, ast.Import):
        return [alias.name.split(".")[0] for alias in node.names]
    if isinstance(node, ast.ImportFrom) and not node.level:
        return [node.module.split(".")[0]]
    return []


def _loaded_before_bertlayers(body, bertlayers_loaded, imports_bertlayers):
    """The lines in `body` (a module's or function's statements, functions within searched in
    turn) where a module that loads TensorFlow is imported before bertlayers is, in a scope that
    imports bertlayers (a module: anywhere in its file; a function: among its own statements,
    so that a peer's worker importing a bertlayers helper late is left alone) and has not yet."""
    found = []
    for node in body:
        names = _imported(node)
        if "bertlayers" in names:
            bertlayers_loaded = True
        elif imports_bertlayers and not bertlayers_loaded and _LOADS_TENSORFLOW.intersection(names):
            found.append(node.lineno)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = any("bertlayers" in _imported(child) for child in node.body)
            found += _loaded_before_bertlayers(node.body, bertlayers_loaded, inner)
    return found


def test_scripts_import_bertlayers_before_tensorflow():
    """Every example and benchmark that uses bertlayers imports it before Keras or TensorFlow:
    TensorFlow reads TF_ENABLE_ONEDNN_OPTS once, as it loads, so a script that loads it first
    runs without the oneDNN rewrites bertlayers turns on (on CPUs without AVX-512 VNNI, BF16 or
    AMX: 1.34x at batch 32, docs/performance.md). An import sorter that moves `import keras`
    above the bertlayers imports breaks this without a word; `# isort: split` after `import
    bertlayers` keeps it in place."""
    offenders = []
    for folder in ("examples", "benchmarks"):
        for path in sorted(glob.glob(os.path.join(_REPOSITORY, folder, "*.py"))):
            with open(path) as file:
                tree = ast.parse(file.read())
            anywhere = any("bertlayers" in _imported(node) for node in ast.walk(tree))
            lines = _loaded_before_bertlayers(tree.body, False, anywhere)
            offenders += [f"{folder}/{os.path.basename(path)}:{line}" for line in lines]
    assert offenders == []

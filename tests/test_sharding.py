"""Keras's distribution API on bertlayers' models under JAX (`bertlayers.training.sharding`), each
case in child processes on host CPU devices (Keras picks its backend, and JAX its device count,
once per process):
  - model parallelism on a 2x2 `batch` x `model` mesh, for every encoder family: the attention
    and feed-forward kernels are split over `model` as the rules say, and (one family a kind of
    attention) a classifier's outputs and its weights after a training step equal one device's;
  - data parallelism across processes: through the runners (test_finetuning's and
    test_pretraining's two JAX processes of 2 devices each, against one process on one device).
"""

import json

import numpy as np
import pytest
from processes import environment, python, run, script

from bertlayers.training.sharding import process_rows, processes_from_environment

# Every family's encoder (presets cut to a tiny size), a classifier on it, on one device and on
# the 2x2 mesh from the same weights; prints a JSON report.
_MODEL_PARALLEL = """
import json, re
import jax, keras, numpy as np
import bertlayers
from bertlayers.models import SequenceClassifier
from bertlayers.networks import build_encoder, get_preset
from bertlayers.networks.weight_layout import model_parallel_axes
from bertlayers.training import create_optimizer
from bertlayers.training.sharding import check_model_parallel, model_parallel

TINY = dict(vocabulary_size=64, num_layers=2, hidden_size=16, num_heads=4, intermediate_size=32,
            max_sequence_length=16, dropout=0.0, attention_dropout=0.0)
PRESETS = ("bert_tiny", "albert_base", "deberta_v3_base", "modernbert_base", "eurobert_210m",
           "gte_base_en_v1_5", "nomic_embed_text_v1_5", "xlnet_base")
# Compiled on both and compared: one family a kind of attention (absolute, shared blocks,
# disentangled, rotary local/global, two-stream). The other rotary families' weights are placed and
# checked without compiling: what XLA computes from a placement is not the library's code.
COMPARED = ("bert_tiny", "albert_base", "deberta_v3_base", "modernbert_base", "xlnet_base")
rng = np.random.default_rng(0)
B, S = 4, 12
mask = np.ones((B, S), "int32"); mask[1, 7:] = 0
inputs = {"token_ids": rng.integers(5, 64, (B, S)).astype("int32"), "segment_ids": np.zeros((B, S), "int32"),
          "padding_mask": mask}
labels = np.arange(B) % 3

def classifier(name):
    config = get_preset(name)
    sizes = dict(TINY)
    if config.layer_types:
        sizes["layer_types"] = tuple(config.layer_types[: sizes["num_layers"]])
    if config.embedding_size:
        sizes["embedding_size"] = 8
    model = SequenceClassifier(build_encoder(config.replace(**sizes)), 3, dropout=0.0)
    model.compile(optimizer=create_optimizer(1e-2, 10, 0), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model

report = {"devices": len(jax.devices())}
for name in PRESETS:
    keras.utils.set_random_seed(1)
    one = classifier(name)
    start = one.get_weights()
    compared = name in COMPARED
    if compared:
        before = one.predict_on_batch(inputs)["logits"]
        one.fit(inputs, labels, batch_size=B, epochs=1, shuffle=False, verbose=0)
    keras.distribution.set_distribution(model_parallel(model_devices=2))
    try:
        mesh = classifier(name)
        mesh.set_weights(start)
        sharded = check_model_parallel(mesh, 2)
        placed = {}
        for variable in mesh.variables:
            axes = model_parallel_axes(variable.path)
            if axes is not None:
                spec = tuple(variable.value.sharding.spec) + (None,) * (len(axes) - len(variable.value.sharding.spec))
                placed[variable.path] = spec == axes
        if compared:
            mesh_before = mesh.predict_on_batch(inputs)["logits"]
            mesh.fit(inputs, labels, batch_size=B, epochs=1, shuffle=False, verbose=0)
    finally:
        keras.distribution.set_distribution(None)
    report[name] = {
        "sharded": len(sharded),
        "blocks": len({v.path.split("/")[0] for v in mesh.variables if v.path.startswith("transformer_layer_")}),
        "misplaced": sorted(path for path, ok in placed.items() if not ok),
    }
    if compared:
        report[name].update(
            output_difference=float(np.abs(before - mesh_before).max()),
            step_difference=max(float(np.abs(a - np.asarray(b)).max()) for a, b in zip(one.get_weights(), mesh.get_weights())),
            step_largest_move=max(float(np.abs(a - b).max()) for a, b in zip(one.get_weights(), start)),
        )
print(json.dumps(report))
"""


@pytest.mark.slow(reason="a JAX child places every family's classifier on a 2x2 mesh and compiles five of them")
def test_model_parallel_splits_every_family_and_equals_one_device():
    env = environment(KERAS_BACKEND="jax", XLA_FLAGS="--xla_force_host_platform_device_count=4")
    report = json.loads(run(python(_MODEL_PARALLEL), env=env, timeout=900).stdout.strip().splitlines()[-1])
    assert report["devices"] == 4
    families = {name: found for name, found in report.items() if name != "devices"}
    assert len(families) == 8 and sum("output_difference" in found for found in families.values()) == 5
    for name, found in families.items():
        # Each block's query/key/value/output and two feed-forward kernels at least (ALBERT's
        # blocks share one set; biases where a family has them).
        assert found["sharded"] >= 6 * found["blocks"], (name, found)
        assert found["misplaced"] == [], (name, found)
        if "output_difference" not in found:  # placed and checked, not compiled
            continue
        assert found["output_difference"] < 1e-5, (name, found)
        assert found["step_largest_move"] > 1e-3, (name, found)  # the step moved the weights
        assert found["step_difference"] < 1e-5, (name, found)


def test_process_rows_give_each_process_its_share_of_every_global_batch():
    """Each process's rows of every global batch, contiguous and in process order; refusals."""
    shares = [process_rows(10, 4, 2, process) for process in (0, 1)]
    np.testing.assert_array_equal(shares[0], [0, 1, 4, 5])  # the last partial batch (8, 9) left out
    np.testing.assert_array_equal(shares[1], [2, 3, 6, 7])
    with pytest.raises(ValueError, match="not a multiple of 3 processes"):
        process_rows(10, 4, 3, 0)


def test_model_parallel_refuses_what_it_cannot_split():
    """A model whose heads the model axis does not divide is named with its variable and shape;
    a rule with an axis that is not the model axis is refused; the TensorFlow backend is pointed to
    its strategies."""
    import keras

    from bertlayers import backend
    from bertlayers.families.bert import BertEncoder
    from bertlayers.networks.weight_layout import register_model_parallel_rule
    from bertlayers.training.sharding import check_model_parallel

    encoder = BertEncoder(vocabulary_size=50, num_layers=1, hidden_size=12, num_heads=3, intermediate_size=24)
    with pytest.raises(ValueError, match=r"self_attention/query/kernel \(shape \(12, 3, 4\)\) cannot be split over 2"):
        check_model_parallel(encoder, 2)
    assert len(check_model_parallel(encoder, 3)) == 10  # q, k, v (kernels, biases), output, FFN in (2), out
    with pytest.raises(ValueError, match="'model' or None"):
        register_model_parallel_rule(r".*/mine", ("batch",))
    if keras.backend.backend() != "jax":
        with pytest.raises(RuntimeError, match="--strategy multi_worker"):
            backend.enable_cross_process_collectives()


@pytest.mark.slow(reason="the runner under JAX in children, on 2 devices and on one")
@pytest.mark.tensorflow_only  # it starts the JAX runs itself
def test_a_runner_under_jax_with_strategy_mirrored_trains_on_every_device_to_one_devices_weights(tmp_path):
    """`run_classifier.py --strategy mirrored --num_cpu_devices 2` under JAX splits its batches over
    two devices (the last batch of 3 rows, which two do not divide, placed whole on each) and
    ends with the weights of the one-device run."""
    import csv

    import keras

    import bertlayers.models  # noqa: F401 (registers the classes the saved models name)
    from bertlayers.families.bert import BertEncoder
    from bertlayers.utils.assets import rotten_tomatoes_snippets

    snippets = rotten_tomatoes_snippets()
    for file, rows in (("train.csv", snippets[:23]), ("eval.csv", snippets[2000:2009])):
        with open(tmp_path / file, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([("text", "label"), *rows])
    BertEncoder(vocabulary_size=30522, num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32).save(
        str(tmp_path / "encoder.keras")
    )
    common = [
        *("--train_file", tmp_path / "train.csv", "--eval_file", tmp_path / "eval.csv"),
        *("--init", tmp_path / "encoder.keras", "--epochs", 1, "--batch_size", 10, "--sequence_length", 16),
        *("--pad_to_sequence_length", "--learning_rate", "1e-3", "--verbose", 0),  # one shape: fewer compiles
    ]
    jax = environment(KERAS_BACKEND="jax")
    split = run(
        script(
            "run_classifier.py",
            *common,
            "--strategy",
            "mirrored",
            "--num_cpu_devices",
            2,
            "--output_dir",
            tmp_path / "two",
        ),
        env=jax,
    )
    assert "data parallel over 2 JAX devices" in split.stdout + split.stderr
    run(script("run_classifier.py", *common, "--output_dir", tmp_path / "one"), env=jax)
    two, one = (keras.saving.load_model(str(tmp_path / name / "model.keras")) for name in ("two", "one"))
    start = keras.saving.load_model(str(tmp_path / "encoder.keras")).get_weights()
    assert max(float(np.abs(a - b).max()) for a, b in zip(one.encoder.get_weights(), start)) > 1e-4  # it trained
    assert max(float(np.abs(a - b).max()) for a, b in zip(two.get_weights(), one.get_weights())) < 1e-5


_LOCAL_DATA_PARALLEL = """
import numpy as np
from bertlayers import backend
from bertlayers.training.sharding import local_data_parallel

distribution = local_data_parallel(num_cpu_devices=2)
place = backend.jax_distribution_module().distribute_data_input
for rows in (4, 3):
    batch = place(np.zeros((rows, 5), "int32"), distribution.get_data_layout((rows, 5)), "batch")
    print(rows, sorted(shard.data.shape[0] for shard in batch.addressable_shards))
from bertlayers.training.distribute import compile_options
from bertlayers.training.length_batching import length_batches
print("compiled", compile_options(None)["jit_compile"])
mask = np.zeros((4, 40), "int32")
for row, real in enumerate((5, 20, 3, 33)):
    mask[row, :real] = 1
x = {"token_ids": mask * 7, "segment_ids": 0 * mask, "padding_mask": mask}
print("lengths", [int(b["padding_mask"].shape[1]) for b in length_batches(x, batch_size=2)])
shared = length_batches(x, batch_size=2, examples_multiple=3)  # the longest left out: 3 examples for 3 devices
print("shared", [tuple(b["padding_mask"].shape) for b in shared], shared.cardinality().numpy())
print("uncut", [tuple(b["padding_mask"].shape) for b in length_batches(x, batch_size=3, cut=False)])
from bertlayers.training import build_strategy
for shares_batches in (False, True):  # a fine-tuning runner; pretraining without KERAS_DISTRIBUTION_*
    try:
        build_strategy("multi_worker", shares_batches=shares_batches)
    except ValueError as error:
        print(error)
"""


def test_under_jax_the_runners_split_batches_compile_steps_round_lengths_and_refuse_multi_worker():
    """Under JAX: a batch the two devices divide is split, one they do not is placed whole on each;
    the runners' steps are compiled and their batches' lengths rounded up to multiples of 16;
    `multi_worker` is refused where the caller does not share out the batches, and where Keras's
    variables naming the processes are not set, naming what to use."""
    shown = run(python(_LOCAL_DATA_PARALLEL), env=environment(KERAS_BACKEND="jax")).stdout.splitlines()
    assert shown[-8:-6] == ["4 [2, 2]", "3 [3, 3]"]  # two rows a device; three rows on each
    assert shown[-6] == "compiled True"  # a runner's step runs under jax.jit, not op by op
    assert shown[-5] == "lengths [16, 40]"  # sorted: (3, 5) to 16; (20, 33) to 48, capped at the arrays' 40
    assert shown[-4] == "shared [(2, 16), (1, 32)] 2"  # (3, 5) to 16; 20 to 32; 33 left out
    assert shown[-3] == "uncut [(3, 40), (1, 40)]"
    assert shown[-2].startswith(
        "--strategy multi_worker under KERAS_BACKEND=jax trains across processes in the runners"
    )
    assert "--strategy mirrored" in shown[-2]
    assert shown[-1].startswith(
        "Training across processes under KERAS_BACKEND=jax needs KERAS_DISTRIBUTION_JOB_ADDRESSES"
    )


def test_the_processes_are_read_from_keras_variables_and_bad_values_named():
    """Keras's KERAS_DISTRIBUTION_* variables give (coordinator, processes, this process); none set
    is one process; a missing or malformed one is named."""
    names = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES", "KERAS_DISTRIBUTION_PROCESS_ID")
    given = dict(zip(names, ("10.0.0.1:1234,10.0.0.2:1234", "2", "1")))
    assert processes_from_environment(given) == ("10.0.0.1:1234", 2, 1)
    assert processes_from_environment({}) is None
    with pytest.raises(ValueError, match="KERAS_DISTRIBUTION_PROCESS_ID is not set"):
        processes_from_environment({**given, names[2]: ""})
    with pytest.raises(ValueError, match="KERAS_DISTRIBUTION_NUM_PROCESSES='two' is not a whole number"):
        processes_from_environment({**given, names[1]: "two"})
    with pytest.raises(ValueError, match=r"KERAS_DISTRIBUTION_PROCESS_ID=2 is outside \[0, 2\)"):
        processes_from_environment({**given, names[2]: "2"})
    with pytest.raises(ValueError, match="process 0's host:port"):
        processes_from_environment({**given, names[0]: "10.0.0.1"})

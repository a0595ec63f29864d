"""Checkpoint tensors read when looked up: the safetensors reader against the `safetensors`
library's own, bfloat16 files, malformed headers, and loading holding one tensor at a time."""

import gc
import json
import struct
import weakref

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from bertlayers.convert.checkpoint_tensors import CheckpointTensors, read_safetensors, renamed
from bertlayers.convert.weight_map import WeightMap


def test_every_dtype_reads_as_the_safetensors_library_reads_it(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {
        "f64": rng.normal(size=(3, 2)),
        "f32": rng.normal(size=(4, 5)).astype("float32"),
        "f16": rng.normal(size=(7,)).astype("float16"),
        "i64": rng.integers(-9, 9, (2, 2, 2)),
        "i32": rng.integers(-9, 9, (5,)).astype("int32"),
        "i16": rng.integers(-9, 9, (3,)).astype("int16"),
        "i8": rng.integers(-9, 9, (3,)).astype("int8"),
        "u8": rng.integers(0, 255, (6,)).astype("uint8"),
        "bool": rng.integers(0, 2, (4,)).astype(bool),
        "scalar": np.array(2.5, "float32"),
        "empty": np.zeros((0, 3), "float32"),
    }
    path = str(tmp_path / "model.safetensors")
    save_file(tensors, path, metadata={"format": "pt"})
    expected, read = load_file(path), read_safetensors(path)
    assert sorted(read) == sorted(expected) and len(read) == len(expected)
    for name, array in expected.items():
        assert read[name].dtype == array.dtype and read[name].shape == array.shape, name
        np.testing.assert_array_equal(read[name], array, err_msg=name)
    assert "__metadata__" not in read and "missing" not in read
    with pytest.raises(KeyError):
        read["missing"]


def test_bfloat16_tensors_read_as_float32_of_the_same_values(tmp_path):
    """A bf16 file written by safetensors' TensorFlow side, read without TensorFlow's help."""
    import tensorflow as tf
    from safetensors.tensorflow import save_file as save_tensorflow

    values = np.random.default_rng(1).normal(size=(8, 3)).astype("float32") * 100
    bfloat16 = tf.cast(tf.constant(values), tf.bfloat16)
    path = str(tmp_path / "model.safetensors")
    save_tensorflow({"w": bfloat16}, path)
    read = read_safetensors(path)["w"]
    assert read.dtype == np.float32
    np.testing.assert_array_equal(read, tf.cast(bfloat16, tf.float32).numpy())
    assert not np.array_equal(read, values)  # rounded to bfloat16's 8 bits of mantissa


@pytest.mark.slow
def test_a_bfloat16_checkpoint_loads_the_model_its_float32_values_load(tmp_path):
    """The MiniLM folder's weights saved in bfloat16, and the same rounded values in float32:
    the same encoder (a bf16 folder was refused before: NumPy has no bfloat16)."""
    import shutil

    import tensorflow as tf
    from safetensors.tensorflow import save_file as save_tensorflow

    from bertlayers.families.bert import load_huggingface_bert
    from bertlayers.utils.assets import minilm_path

    folders = {}
    for kind in ("bfloat16", "float32"):
        folder = tmp_path / kind
        shutil.copytree(minilm_path(), folder)
        weights = load_file(str(folder / "model.safetensors"))
        rounded = {name: tf.cast(tf.constant(array), tf.bfloat16) for name, array in weights.items()}
        if kind == "bfloat16":
            save_tensorflow(rounded, str(folder / "model.safetensors"))
        else:
            save_file(
                {k: tf.cast(v, tf.float32).numpy() for k, v in rounded.items()}, str(folder / "model.safetensors")
            )
        folders[kind] = load_huggingface_bert(str(folder))
    for ours, theirs in zip(folders["bfloat16"].weights, folders["float32"].weights):
        assert ours.dtype == "float32"
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs), err_msg=ours.path)


def file_bytes(header, data=b"", length=None):
    """A safetensors file's bytes: the header's length (or `length`), the header, the data."""
    encoded = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(encoded) if length is None else length) + encoded + data


F32_PAIR = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


@pytest.mark.parametrize(
    "contents, message",
    [
        (b"abc", "the file has 3 bytes, fewer than the header's 8-byte length"),
        (file_bytes({"w": F32_PAIR}, length=10**6), "its header says it is 1000000 bytes long"),
        (file_bytes(b"{not json"), "its header is not JSON"),
        (file_bytes([1, 2]), "its header is a JSON list, not an object of tensors"),
        (file_bytes({"w": "F32"}), "tensor 'w': its header entry is 'F32', not an object"),
        (
            file_bytes({"w": {**F32_PAIR, "dtype": "F8_E4M3"}}, bytes(8)),
            "tensor 'w': dtype 'F8_E4M3' is not one of F64",
        ),
        (
            file_bytes({"w": {**F32_PAIR, "shape": [2, -1]}}, bytes(8)),
            r"tensor 'w': shape \[2, -1\] is not a list of sizes",
        ),
        (
            file_bytes({"w": {**F32_PAIR, "data_offsets": [0]}}, bytes(8)),
            r"tensor 'w': data_offsets \[0\] is not a \[begin, end\]",
        ),
        (
            file_bytes({"w": {**F32_PAIR, "shape": [3], "data_offsets": [0, 12]}}, bytes(8)),
            r"tensor 'w': data_offsets \[0, 12\] do not hold a F32 tensor of shape \[3\] in the file's 8 bytes",
        ),
        (file_bytes({"w": {**F32_PAIR, "shape": [3]}}, bytes(8)), r"do not hold a F32 tensor of shape \[3\]"),
    ],
)
def test_a_malformed_file_is_refused_naming_what_is_wrong(tmp_path, contents, message):
    path = tmp_path / "model.safetensors"
    path.write_bytes(contents)
    with pytest.raises(ValueError, match=message):
        read_safetensors(str(path))


def test_renamed_reads_through_to_the_source_only_when_looked_up():
    reads = []
    source = CheckpointTensors(["bert.a", "b"], lambda name: reads.append(name) or np.zeros(2))
    tensors = renamed(source, lambda name: name.removeprefix("bert."))
    assert list(tensors) == ["a", "b"] and "a" in tensors and "bert.a" not in tensors and reads == []
    tensors["a"]
    assert reads == ["bert.a"]


def test_assigning_holds_one_checkpoint_tensor_at_a_time():
    """WeightMap checks every tensor, then assigns them reading each again: no array read is kept
    (keeping every checked array until all were checked held a second copy of the checkpoint)."""
    import keras

    variables = [keras.Variable(np.zeros((4, 3), "float32"), name=f"v{i}") for i in range(5)]
    alive, most_alive = [], [0]

    def read(name):
        most_alive[0] = max(most_alive[0], sum(ref() is not None for ref in alive))
        array = np.full((3, 4), float(name[1:]), "float32")
        alive.append(weakref.ref(array))
        return array

    weights = WeightMap(CheckpointTensors([f"t{i}" for i in range(5)], read), "test")
    for index, variable in enumerate(variables):
        weights.add(variable, f"t{index}", lambda array: array.T)
    assert weights.apply() == []
    gc.collect()
    assert len(alive) == 10  # each tensor read to check it, then to assign it
    assert most_alive[0] <= 1 and all(ref() is None for ref in alive)
    for index, variable in enumerate(variables):
        np.testing.assert_array_equal(np.asarray(variable), np.full((4, 3), float(index)))

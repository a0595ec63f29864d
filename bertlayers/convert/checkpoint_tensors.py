"""A checkpoint's tensors by name, each read from its file when a loader asks for it.

Loading then holds the model's variables and one checkpoint tensor at a time, not the variables
and a second copy of the whole checkpoint (what reading every tensor up front holds at its peak).
"""

import json
import os
import struct
from collections.abc import Callable, Iterable, Mapping

import ml_dtypes
import numpy as np

# safetensors' dtype names → NumPy's (all little-endian, as the format stores them).
SAFETENSORS_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"),
    "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}


class CheckpointTensors(Mapping):
    """Names → arrays, each array produced by `read(name)` at every lookup and kept by no one here.

    Args:
      names: the tensors' names, in the checkpoint's order.
      read: the array of one name.
    """

    def __init__(self, names: Iterable[str], read: Callable[[str], np.ndarray]):
        self._names = dict.fromkeys(names)
        self._read = read

    def __getitem__(self, name):
        if name not in self._names:
            raise KeyError(name)
        return self._read(name)

    def __contains__(self, name):
        return name in self._names

    def __iter__(self):
        return iter(self._names)

    def __len__(self):
        return len(self._names)


def renamed(tensors: Mapping, rename: Callable[[str], str]) -> CheckpointTensors:
    """`tensors` under the names `rename` gives, read from `tensors` only when looked up."""
    sources = {rename(name): name for name in tensors}
    return CheckpointTensors(sources, lambda name: tensors[sources[name]])


def read_safetensors(path: str) -> CheckpointTensors:
    """The tensors of a `.safetensors` file, its header read and checked now, each tensor's bytes
    read at its lookup. bfloat16 tensors come as float32 (NumPy has no bfloat16 arithmetic; the
    models' weights are float32).

    Raises:
      ValueError: a header that is not the format's (its length, JSON, a dtype, a shape or
        offsets outside the file), naming the tensor.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        start = f.read(8)
        if len(start) < 8:
            raise ValueError(f"the file has {size} bytes, fewer than the header's 8-byte length")
        (header_size,) = struct.unpack("<Q", start)
        if header_size > size - 8:
            raise ValueError(
                f"its header says it is {header_size} bytes long; the file has {size - 8} after the length"
            )
        try:
            header = json.loads(f.read(header_size))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"its header is not JSON: {error}") from None
    if not isinstance(header, dict):
        raise ValueError(f"its header is a JSON {type(header).__name__}, not an object of tensors")
    data_start, data_size = 8 + header_size, size - 8 - header_size
    entries = {}
    for name, entry in header.items():
        if name != "__metadata__":
            entries[name] = _checked_entry(name, entry, data_size)

    def read(name):
        dtype, shape, offset = entries[name]
        array = np.fromfile(path, dtype=dtype, count=int(np.prod(shape)), offset=data_start + offset).reshape(shape)
        return array.astype(np.float32) if dtype == SAFETENSORS_DTYPES["BF16"] else array

    return CheckpointTensors(entries, read)


def _checked_entry(name, entry, data_size):
    """(dtype, shape, offset in the data) of one header entry, or a ValueError naming what is wrong."""
    if not isinstance(entry, dict):
        raise ValueError(f"tensor {name!r}: its header entry is {entry!r}, not an object")
    dtype = SAFETENSORS_DTYPES.get(entry.get("dtype"))
    if dtype is None:
        raise ValueError(f"tensor {name!r}: dtype {entry.get('dtype')!r} is not one of {', '.join(SAFETENSORS_DTYPES)}")
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ValueError(f"tensor {name!r}: shape {shape!r} is not a list of sizes")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
        raise ValueError(f"tensor {name!r}: data_offsets {offsets!r} is not a [begin, end] pair")
    begin, end = offsets
    if not 0 <= begin <= end <= data_size or end - begin != int(np.prod(shape)) * dtype.itemsize:
        raise ValueError(
            f"tensor {name!r}: data_offsets {offsets} do not hold a {entry['dtype']} tensor of shape {shape} "
            f"in the file's {data_size} bytes of data (the file is cut short or its header is wrong)"
        )
    return dtype, tuple(shape), begin

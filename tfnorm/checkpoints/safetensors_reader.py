"""`SafetensorsReader`: the tensors of a safetensors checkpoint, one at a time."""

from __future__ import annotations

import json
import os
import struct

import numpy as np

from tfnorm.checkpoints.errors import CheckpointError

#: The single-file and the sharded checkpoint's names in a directory.
WEIGHTS_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"
#: PyTorch pickles, which tfnorm does not read (unpickling runs code).
TORCH_NAMES = ("pytorch_model.bin", "pytorch_model.bin.index.json")

#: safetensors dtype -> the numpy dtype it is stored as (BF16 is read as
#: uint16 and widened to float32: numpy has no bfloat16).
_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "BF16": "<u2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}
_FLOATS = ("F64", "F32", "F16", "BF16")
# A header is a few kB per thousand tensors; anything near this is garbage.
_MAX_HEADER = 100 * 1024 * 1024


def bfloat16_to_float32(bits):
    """float32 values of bfloat16 numbers given as their uint16 bit patterns.

    A bfloat16 is the upper half of a float32 (sign, 8 exponent bits, 7
    mantissa bits), so shifting its 16 bits up and reading the 32 bits as a
    float32 is exact.
    """
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def _header(path):
    """`({key: entry}, data_start, metadata)` of one safetensors file, checked
    against its size."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            prefix = handle.read(8)
            length = struct.unpack("<Q", prefix)[0] if len(prefix) == 8 else None
            if length is None or length > min(size - 8, _MAX_HEADER):
                raise CheckpointError(
                    f"{path}: not a safetensors file, or cut short: its header "
                    f"length field says {length} bytes and the file has {size}."
                )
            raw = handle.read(length)
    except OSError as error:
        raise CheckpointError(
            f"{path}: cannot read the file ({error.strerror})."
        ) from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise CheckpointError(
            f"{path}: the safetensors header is not valid JSON (corrupted file)."
        ) from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: the safetensors header is not a JSON object.")
    metadata = header.pop("__metadata__", None) or {}
    data_size = size - 8 - length
    for key, entry in header.items():
        _check_entry(path, key, entry, data_size)
    return header, 8 + length, metadata


def _check_entry(path, key, entry, data_size):
    try:
        dtype, shape, (start, end) = (
            entry["dtype"],
            entry["shape"],
            entry["data_offsets"],
        )
        count = int(np.prod(shape, dtype=np.int64))
        itemsize = np.dtype(_DTYPES[dtype]).itemsize
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(
            f"{path}: the header's entry for tensor {key!r} is malformed or has a "
            f"dtype tfnorm does not read. Received: {key}={entry!r}"
        ) from None
    if not 0 <= start <= end <= data_size or end - start != count * itemsize:
        raise CheckpointError(
            f"{path}: tensor {key!r} lies outside the file's data (bytes "
            f"{start}-{end} of {data_size}): the file is truncated or corrupted."
        )


class SafetensorsReader:
    """Reads a safetensors checkpoint lazily, tensor by tensor.

    `path` is a `.safetensors` file, or a directory holding
    `model.safetensors` or a sharded checkpoint (`model.safetensors.index.json`
    and the shards its `weight_map` names). Only the headers are read on
    opening (and checked against the file sizes); `get(key)` reads that one
    tensor, `get_rows(key, start, stop)` a slab of its rows. Floating-point
    tensors come back as float32 (float16 and bfloat16 widened exactly;
    numpy has no bfloat16), others as stored.

    Example:

    ```python
    with SafetensorsReader("tiny-llama") as reader:
        for key in reader.keys():
            print(key, reader.shape(key))
        table = reader.get("model.embed_tokens.weight", shape=(128, 32))
    ```

    Args:
        path: a safetensors file or a checkpoint directory.

    Raises:
        CheckpointError: one line naming the file: missing or unreadable, a
            directory with PyTorch weights only (with how to convert them), a
            truncated or corrupted header, a shard the index names that is
            missing; on `get`, a key that is not there or a shape other than
            the one expected.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self._files = {}  # shard path -> (header, data start, metadata)
        self._where = {}  # key -> shard path
        for shard in self._shards():
            header, start, metadata = _header(shard)
            self._files[shard] = (header, start, metadata)
            for key in header:
                self._where.setdefault(key, shard)

    def _shards(self):
        if not os.path.isdir(self.path):
            if not os.path.exists(self.path):
                raise CheckpointError(f"{self.path}: no such file or directory.")
            return [self.path]
        index = os.path.join(self.path, INDEX_NAME)
        if os.path.exists(index):
            return self._indexed_shards(index)
        single = os.path.join(self.path, WEIGHTS_NAME)
        if os.path.exists(single):
            return [single]
        if any(os.path.exists(os.path.join(self.path, n)) for n in TORCH_NAMES):
            raise CheckpointError(
                f"{self.path}: holds PyTorch weights (pytorch_model.bin) only; "
                "tfnorm reads safetensors. Convert once where PyTorch is "
                "installed: transformers.AutoModel.from_pretrained(path)"
                ".save_pretrained(path, safe_serialization=True)."
            )
        raise CheckpointError(
            f"{self.path}: no {WEIGHTS_NAME} or {INDEX_NAME} in the directory."
        )

    def _indexed_shards(self, index):
        try:
            with open(index, encoding="utf-8") as handle:
                weight_map = json.load(handle)["weight_map"]
            names = sorted(set(weight_map.values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise CheckpointError(
                f"{index}: not a readable index (JSON with a `weight_map` of "
                "tensor name -> shard file)."
            ) from None
        shards = [os.path.join(self.path, name) for name in names]
        for shard in shards:
            if not os.path.isfile(shard):
                raise CheckpointError(
                    f"{shard}: the shard is missing; {index} names it."
                )
        self._index = (index, weight_map)
        return shards

    # -- what is in it ---------------------------------------------------

    def keys(self):
        """The tensor names, sorted."""
        return sorted(self._where)

    def __contains__(self, key):
        return key in self._where

    def _entry(self, key):
        if key not in self._where:
            raise CheckpointError(
                f"{self.path}: the checkpoint has no tensor {key!r} "
                f"({len(self._where)} tensors, e.g. {self.keys()[:3]})."
            )
        shard = self._where[key]
        return shard, self._files[shard][0][key]

    def shape(self, key):
        """The stored shape of tensor `key`, a tuple."""
        return tuple(self._entry(key)[1]["shape"])

    def dtype(self, key):
        """The stored dtype of tensor `key` (`"F32"`, `"BF16"`, ...)."""
        return self._entry(key)[1]["dtype"]

    def file_of(self, key):
        """The file tensor `key` is stored in."""
        return self._entry(key)[0]

    # -- reading ---------------------------------------------------------

    def require_shape(self, key, shape, reason=None):
        """Raises `CheckpointError` unless tensor `key` has shape `shape`.

        Args:
            key: the tensor's name.
            shape: tuple, the shape it must have.
            reason: str or None, where `shape` comes from, for the error
                (e.g. `"config.json: hidden_size=32"`).
        """
        shard, entry = self._entry(key)
        stored = tuple(entry["shape"])
        if stored != tuple(shape):
            because = f" ({reason})" if reason else ""
            raise CheckpointError(
                f"{shard}: tensor {key!r} has shape {list(stored)}, but the "
                f"config makes it {list(shape)}{because}."
            )

    def get(self, key, shape=None, reason=None):
        """Tensor `key` as a numpy array (floats as float32).

        Args:
            key: the tensor's name.
            shape: tuple or None, the shape it must have (see
                `require_shape`).
            reason: str or None, where `shape` comes from, for the error.
        """
        if shape is not None:
            self.require_shape(key, shape, reason)
        stored = self.shape(key)
        if not stored:
            return self._read(key, 0, 1).reshape(())
        return self.get_rows(key, 0, stored[0])

    def get_rows(self, key, start, stop):
        """Rows `start:stop` of tensor `key` (along its first axis), reading
        only their bytes: a large tensor can be copied a slab at a time.
        Floats come back as float32."""
        stored = self.shape(key)
        if not 0 <= start <= stop <= stored[0]:
            raise ValueError(
                f"rows {start}:{stop} are outside tensor {key!r} of shape "
                f"{list(stored)}."
            )
        return self._read(key, start, stop).reshape((stop - start,) + stored[1:])

    def _read(self, key, start, stop):
        shard, entry = self._entry(key)
        dtype = np.dtype(_DTYPES[entry["dtype"]])
        row = int(np.prod(entry["shape"][1:], dtype=np.int64))
        count = (stop - start) * row
        with open(shard, "rb") as handle:
            handle.seek(self._files[shard][1] + entry["data_offsets"][0])
            handle.seek(start * row * dtype.itemsize, os.SEEK_CUR)
            value = np.fromfile(handle, dtype, count)
        if value.size != count:
            raise CheckpointError(
                f"{shard}: tensor {key!r} is cut short: the file ended "
                f"{count - value.size} values early."
            )
        if entry["dtype"] == "BF16":
            # numpy has no bfloat16: the file's uint16 bit patterns widen.
            return bfloat16_to_float32(value)
        if entry["dtype"] in _FLOATS and dtype != np.float32:
            return value.astype(np.float32)
        return value

    def metadata(self):
        """The `__metadata__` strings of the first file (`{"format": "pt"}`)."""
        return dict(next(iter(self._files.values()))[2])

    def close(self):
        """Nothing to release (each read opens and closes its file); kept so
        that `with SafetensorsReader(...)` reads as a scoped use."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

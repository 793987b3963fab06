"""`save_safetensors`: numpy arrays into a safetensors checkpoint directory."""

from __future__ import annotations

import json
import os

import numpy as np

from tfnorm.checkpoints.errors import CheckpointError
from tfnorm.checkpoints.safetensors_reader import INDEX_NAME, WEIGHTS_NAME


def _shard_groups(tensors, max_shard_bytes):
    """The tensor names in order, cut into groups of at most `max_shard_bytes`
    (a tensor larger than that gets a group of its own)."""
    groups, current, size = [], [], 0
    for name, value in tensors.items():
        nbytes = value.nbytes
        if current and max_shard_bytes and size + nbytes > max_shard_bytes:
            groups.append(current)
            current, size = [], 0
        current.append(name)
        size += nbytes
    if current or not groups:
        groups.append(current)
    return groups


def save_safetensors(tensors, directory, *, max_shard_bytes=None, metadata=None):
    """Writes `{name: array}` as `directory/model.safetensors`, or as shards.

    The layout `transformers` reads: one `model.safetensors`, or with
    `max_shard_bytes` and more than that many bytes, shards
    `model-00001-of-0000N.safetensors` and a `model.safetensors.index.json`
    mapping each tensor to its shard. The files' metadata says
    `{"format": "pt"}` (what `transformers` expects), plus `metadata`.

    Example:

    >>> import numpy as np, tempfile
    >>> out = tempfile.mkdtemp()
    >>> save_safetensors({"w": np.ones((2, 3), "float32")}, out)
    ['model.safetensors']

    Args:
        tensors: dict of tensor name -> numpy array (written in its dtype).
        directory: str, created if missing.
        max_shard_bytes: int or None, the largest shard. Defaults to None
            (one file).
        metadata: dict of str -> str or None, added to the files' metadata.

    Returns:
        The names of the files written, in `directory`.

    Raises:
        CheckpointError: a value is not a numpy array, or a name not a str.
    """
    from safetensors.numpy import save_file

    arrays = {}
    for name, value in tensors.items():
        if not isinstance(name, str) or not isinstance(value, np.ndarray):
            raise CheckpointError(
                f"{directory}: save_safetensors takes str names and numpy arrays. "
                f"Received: {name!r}={type(value).__name__}"
            )
        # np.ascontiguousarray makes a 0-d array 1-d; a scalar stays one.
        arrays[name] = np.ascontiguousarray(value).reshape(value.shape)
    os.makedirs(directory, exist_ok=True)
    info = {"format": "pt", **(metadata or {})}
    groups = _shard_groups(arrays, max_shard_bytes)
    if len(groups) == 1:
        save_file(arrays, os.path.join(directory, WEIGHTS_NAME), metadata=info)
        return [WEIGHTS_NAME]
    names, weight_map = [], {}
    for number, group in enumerate(groups, 1):
        name = f"model-{number:05d}-of-{len(groups):05d}.safetensors"
        save_file(
            {key: arrays[key] for key in group},
            os.path.join(directory, name),
            metadata=info,
        )
        names.append(name)
        weight_map.update({key: name for key in group})
    index = {
        "metadata": {"total_size": int(sum(a.nbytes for a in arrays.values()))},
        "weight_map": weight_map,
    }
    with open(os.path.join(directory, INDEX_NAME), "w", encoding="utf-8") as handle:
        json.dump(index, handle, indent=2, sort_keys=True)
        handle.write("\n")
    return names + [INDEX_NAME]

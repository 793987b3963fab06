"""`copy_tensor`: one checkpoint tensor into the Keras weight it becomes, a slab at a time.

Both families' Hugging Face readers copy through it. Read whole, a large
tensor would stand in memory several times beside the model while it is
copied (the file's bytes, the float32 array, the tensor made of it): GPT-2
small's token embedding is 154 MB of a 475 MB model. Copied in slabs of
rows written in place, what a load adds to the model's own weights stays a
few slabs.
"""

from __future__ import annotations

import numpy as np

from tfnorm._keras import assign_slice, tf

#: The largest float32 slab a copy holds at a time.
SLAB_BYTES = 16 * 2**20


def _whole(reader, key, target, transpose, part):
    """The whole tensor as the variable's value."""
    value = reader.get(key)
    if part is not None:
        value = value[..., part]
    if transpose:
        value = value.T
    return np.reshape(value, target)


def _row_slabs(reader, key, stored, target, part):
    """Tensor rows to variable rows: each variable row is `per` tensor rows
    (one, or a head's rows of an attention output kernel)."""
    per = stored[0] // target[0]
    row_bytes = 4 * per * int(np.prod(stored[1:]))
    step = max(1, SLAB_BYTES // row_bytes)
    for first in range(0, target[0], step):
        last = min(first + step, target[0])
        value = reader.get_rows(key, first * per, last * per)
        if part is not None:
            value = value[..., part]
        begin = (first,) + (0,) * (len(target) - 1)
        yield begin, np.reshape(value, (last - first,) + tuple(target[1:]))


def _column_slabs(reader, key, stored):
    """A transposed matrix: tensor rows to variable columns."""
    step = max(1, SLAB_BYTES // (4 * stored[1]))
    for first in range(0, stored[0], step):
        value = reader.get_rows(key, first, min(first + step, stored[0]))
        yield (0, first), value.T


def _slabs(reader, key, target, transpose, part):
    """`(begin, value)` pieces that together are the variable's value."""
    stored = reader.shape(key)
    small = 4 * int(np.prod(stored)) <= SLAB_BYTES
    if not small and len(stored) >= 2:
        if not transpose and stored[0] % target[0] == 0:
            return _row_slabs(reader, key, stored, target, part)
        if transpose and part is None and target == stored[::-1]:
            return _column_slabs(reader, key, stored)
    return [((0,) * len(target), _whole(reader, key, target, transpose, part))]


def copy_tensor(reader, key, variable, *, shape, reason, transpose=False, part=None):
    """Copies checkpoint tensor `key` into `variable`.

    The tensor, columns `part` of it if given, transposed if `transpose`,
    reshaped to the variable's shape, is the variable's new value.

    Args:
        reader: a `tfnorm.checkpoints.SafetensorsReader`.
        key: the tensor's name.
        variable: the Keras weight it becomes.
        shape: tuple, the shape the tensor must have.
        reason: str, where `shape` comes from, for the error.
        transpose: bool, whether the (2-D) tensor is stored transposed.
        part: slice or None, the columns of the tensor that are this
            variable's (GPT-2's fused query/key/value).

    Raises:
        CheckpointError: the tensor is missing or has another shape.
    """
    reader.require_shape(key, shape, reason)
    target = tuple(int(d) for d in variable.shape)
    if tf.distribute.has_strategy():
        # A replicated variable is written whole, by the strategy.
        variable.assign(_whole(reader, key, target, transpose, part))
        return
    for begin, value in _slabs(reader, key, target, transpose, part):
        assign_slice(variable, begin, value)

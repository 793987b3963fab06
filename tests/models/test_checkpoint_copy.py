"""copy_tensor: every way a checkpoint tensor becomes a weight, slab by slab."""

from __future__ import annotations

import numpy as np
import pytest

from tests.checkpoints.hf_data import fixture
from tfnorm._keras import add_weight, keras, tf
from tfnorm.checkpoints import CheckpointError, SafetensorsReader, save_safetensors
from tfnorm.models import checkpoint_copy
from tfnorm.models.checkpoint_copy import copy_tensor

EMBED = "model.embed_tokens.weight"
#: Small enough that every tensor below is copied in several slabs.
SLAB = 64


class _CountingReader(SafetensorsReader):
    """Records how many values each read returned (`get` reads through
    `get_rows`)."""

    def __init__(self, path):
        super().__init__(path)
        self.reads = []

    def get_rows(self, key, start, stop):
        value = super().get_rows(key, start, stop)
        self.reads.append(value.size)
        return value


@pytest.fixture
def small_slabs(monkeypatch):
    monkeypatch.setattr(checkpoint_copy, "SLAB_BYTES", SLAB)


def _reader(tmp_path, **tensors):
    save_safetensors(tensors, str(tmp_path))
    return _CountingReader(str(tmp_path))


def _weight(shape, dtype="float32"):
    return add_weight(keras.layers.Layer(dtype=dtype), "w", shape, "zeros")


def _numpy(variable):
    return tf.convert_to_tensor(variable).numpy()


def _values(*shape):
    return np.random.default_rng(0).normal(size=shape).astype(np.float32)


# (tensor shape, variable shape, transpose, part, how it is read)
CASES = {
    "rows": ((40, 8), (40, 8), False, None, "slabs"),
    "rows_per_head": ((12, 8), (3, 4, 8), False, None, "slabs"),
    "fused_columns": ((8, 24), (8, 2, 4), False, slice(8, 16), "slabs"),
    "transposed_matrix": ((40, 8), (8, 40), True, None, "slabs"),
    "transposed_kernel": ((8, 6), (6, 2, 4), True, None, "whole"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_layout_lands_as_the_whole_tensor_would(tmp_path, small_slabs, case):
    stored, target, transpose, part, reading = CASES[case]
    tensor = _values(*stored)
    reader = _reader(tmp_path, t=tensor)
    variable = _weight(target)
    copy_tensor(
        reader,
        "t",
        variable,
        shape=stored,
        reason="test",
        transpose=transpose,
        part=part,
    )
    expected = tensor if part is None else tensor[..., part]
    expected = np.reshape(expected.T if transpose else expected, target)
    np.testing.assert_array_equal(_numpy(variable), expected)
    if reading == "slabs":
        assert len(reader.reads) > 1
        # A slab holds at most SLAB bytes, or one row of the variable.
        row = 4 * max(int(np.prod(stored[1:])), int(np.prod(target[1:])))
        assert max(reader.reads) * 4 <= max(SLAB, row)
    else:
        assert reader.reads == [tensor.size]


def test_a_large_tensor_is_copied_in_bounded_slabs_by_default(tmp_path):
    rows = 3 * checkpoint_copy.SLAB_BYTES // (4 * 256)
    tensor = _values(rows, 256)
    reader = _reader(tmp_path, t=tensor)
    variable = _weight((rows, 256))
    copy_tensor(reader, "t", variable, shape=(rows, 256), reason="test")
    np.testing.assert_array_equal(_numpy(variable), tensor)
    assert len(reader.reads) == 3
    assert max(reader.reads) * 4 <= checkpoint_copy.SLAB_BYTES


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "mixed_bfloat16"])
def test_a_bfloat16_file_fills_a_weight_of_any_dtype_exactly(small_slabs, dtype):
    reader = _CountingReader(fixture("llama_bf16"))
    variable = _weight((300, 32), dtype)
    copy_tensor(reader, EMBED, variable, shape=(300, 32), reason="test")
    # bfloat16 values are exact in bfloat16 and in float32 weights alike.
    assert len(reader.reads) > 1
    np.testing.assert_array_equal(
        _numpy(variable).astype(np.float32),
        reader.get(EMBED),
    )


def test_under_a_distribution_strategy_each_replica_gets_the_whole_tensor(
    tmp_path, small_slabs
):
    tensor = _values(40, 8)
    reader = _reader(tmp_path, t=tensor)
    with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
        variable = _weight((40, 8))
        copy_tensor(reader, "t", variable, shape=(40, 8), reason="test")
    np.testing.assert_array_equal(_numpy(variable), tensor)
    assert reader.reads == [tensor.size]


def test_a_wrong_shape_is_refused_and_the_weight_left_as_it_was(tmp_path):
    reader = _reader(tmp_path, t=_values(4, 8))
    variable = _weight((8, 4))
    with pytest.raises(CheckpointError, match=r"'t' has shape \[4, 8\].*\[8, 4\]"):
        copy_tensor(reader, "t", variable, shape=(8, 4), reason="config.json: n=8")
    assert not _numpy(variable).any()

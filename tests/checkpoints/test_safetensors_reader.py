"""SafetensorsReader on the committed checkpoints and on broken ones."""

from __future__ import annotations

import json
import os
import shutil
import struct

import numpy as np
import pytest

from tests.checkpoints.hf_data import fixture
from tfnorm.checkpoints import CheckpointError, SafetensorsReader, save_safetensors
from tfnorm.checkpoints.safetensors_reader import bfloat16_to_float32

EMBED = "model.embed_tokens.weight"


def test_reads_a_checkpoint_directory_lazily_as_float32():
    reader = SafetensorsReader(fixture("llama_gqa_llama3"))
    assert EMBED in reader and "lm_head.weight" not in reader  # tied head
    assert reader.shape(EMBED) == (300, 32)
    assert reader.dtype(EMBED) == "F32"
    table = reader.get(EMBED, shape=(300, 32))
    assert table.dtype == np.float32 and table.shape == (300, 32)
    assert reader.metadata().get("format") == "pt"


def test_bfloat16_widens_exactly():
    bits = np.array([0x3FC0, 0xC000, 0x0000, 0x7F80], np.uint16)
    assert bfloat16_to_float32(bits).tolist() == [1.5, -2.0, 0.0, float("inf")]
    bf16 = SafetensorsReader(fixture("llama_bf16"))
    assert bf16.dtype(EMBED) == "BF16"
    table = bf16.get(EMBED)
    assert table.dtype == np.float32
    # Every value is a bfloat16: its low 16 bits are zero.
    assert not (table.view(np.uint32) & 0xFFFF).any()
    assert np.abs(table).max() > 0


def test_a_sharded_checkpoint_reads_as_one():
    reader = SafetensorsReader(fixture("llama_sharded"))
    with open(fixture("llama_sharded/model.safetensors.index.json")) as handle:
        weight_map = json.load(handle)["weight_map"]
    assert reader.keys() == sorted(weight_map)
    assert len(set(weight_map.values())) > 1
    for key, shard in weight_map.items():
        assert os.path.basename(reader.file_of(key)) == shard
    assert reader.get("model.norm.weight").shape == (32,)


def test_float16_and_roundtrip_of_the_writer(tmp_path):
    values = {
        "a": np.arange(6, dtype=np.float16).reshape(2, 3),
        "b": np.arange(4, dtype=np.int64),
    }
    assert save_safetensors(values, str(tmp_path)) == ["model.safetensors"]
    reader = SafetensorsReader(str(tmp_path))
    assert reader.get("a").dtype == np.float32
    np.testing.assert_array_equal(reader.get("a"), values["a"].astype(np.float32))
    assert reader.get("b").dtype == np.int64


def _one_line(error):
    text = str(error.value)
    assert "\n" not in text
    return text


def test_missing_path_and_torch_only_directory(tmp_path):
    with pytest.raises(CheckpointError) as error:
        SafetensorsReader(str(tmp_path / "nowhere"))
    assert "nowhere" in _one_line(error)
    (tmp_path / "pytorch_model.bin").write_bytes(b"not read")
    with pytest.raises(CheckpointError) as error:
        SafetensorsReader(str(tmp_path))
    text = _one_line(error)
    assert "pytorch_model.bin" in text and "safe_serialization=True" in text


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda raw: raw[:5], "cut short"),
        (lambda raw: struct.pack("<Q", 10**12) + raw[8:], "cut short"),
        (lambda raw: raw[:8] + b"\xff" * 8 + raw[16:], "not valid JSON"),
        (lambda raw: raw[: len(raw) - 100], "truncated or corrupted"),
    ],
)
def test_a_damaged_file_is_refused_naming_it(tmp_path, damage, words):
    save_safetensors({"w": np.ones((8, 8), np.float32)}, str(tmp_path))
    path = tmp_path / "model.safetensors"
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(CheckpointError) as error:
        SafetensorsReader(str(path))
    text = _one_line(error)
    assert str(path) in text and words in text


def test_a_missing_shard_a_missing_key_and_a_wrong_shape(tmp_path):
    copy = tmp_path / "sharded"
    shutil.copytree(fixture("llama_sharded"), str(copy))
    os.remove(copy / "model-00002-of-00004.safetensors")
    with pytest.raises(CheckpointError) as error:
        SafetensorsReader(str(copy))
    text = _one_line(error)
    assert "model-00002-of-00004.safetensors" in text and "index" in text
    reader = SafetensorsReader(fixture("qwen2"))
    with pytest.raises(CheckpointError) as error:
        reader.get("model.layers.9.mlp.up_proj.weight")
    assert "'model.layers.9.mlp.up_proj.weight'" in _one_line(error)
    with pytest.raises(CheckpointError) as error:
        reader.get(EMBED, shape=(300, 64), reason="config.json: hidden_size=64")
    text = _one_line(error)
    assert EMBED in text and "[300, 32]" in text and "hidden_size=64" in text


@pytest.mark.parametrize("name", ["gpt2", "qwen2", "llama_sharded"])
def test_every_tensor_reads_as_the_safetensors_library_reads_it(name):
    from safetensors import safe_open

    reader = SafetensorsReader(fixture(name))
    for key in reader.keys():
        with safe_open(reader.file_of(key), framework="numpy") as handle:
            expected = handle.get_tensor(key)
        np.testing.assert_array_equal(reader.get(key), expected)


def test_rows_read_only_their_slab_in_every_dtype(tmp_path):
    values = {
        "f32": np.arange(60, dtype=np.float32).reshape(5, 3, 4),
        "f16": np.arange(12, dtype=np.float16).reshape(6, 2),
        "scalar": np.array(7.0, np.float32),
    }
    save_safetensors(values, str(tmp_path))
    reader = SafetensorsReader(str(tmp_path))
    np.testing.assert_array_equal(reader.get_rows("f32", 1, 4), values["f32"][1:4])
    np.testing.assert_array_equal(reader.get_rows("f32", 5, 5), values["f32"][5:5])
    rows = reader.get_rows("f16", 4, 6)
    assert rows.dtype == np.float32
    np.testing.assert_array_equal(rows, values["f16"][4:6].astype(np.float32))
    assert reader.get("scalar").shape == () and float(reader.get("scalar")) == 7.0
    bf16 = SafetensorsReader(fixture("llama_bf16"))
    np.testing.assert_array_equal(bf16.get_rows(EMBED, 7, 9), bf16.get(EMBED)[7:9])
    with pytest.raises(ValueError, match=r"rows 4:6 .*'f32'.*\[5, 3, 4\]"):
        reader.get_rows("f32", 4, 6)


def test_a_file_cut_short_after_opening_is_refused_naming_it(tmp_path):
    save_safetensors({"a": np.ones((4, 4), np.float32)}, str(tmp_path))
    reader = SafetensorsReader(str(tmp_path))
    path = tmp_path / "model.safetensors"
    os.truncate(path, os.path.getsize(path) - 8)
    with pytest.raises(CheckpointError) as error:
        reader.get("a")
    text = _one_line(error)
    assert str(path) in text and "'a'" in text and "cut short" in text

"""save_safetensors: one file or shards and an index, as transformers writes them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfnorm.checkpoints import CheckpointError, SafetensorsReader, save_safetensors


def test_the_writer_shards_past_the_limit(tmp_path):
    values = {f"w{i}": np.full((10, 10), i, np.float32) for i in range(5)}
    names = save_safetensors(values, str(tmp_path), max_shard_bytes=900)
    assert names[-1] == "model.safetensors.index.json" and len(names) == 4
    reader = SafetensorsReader(str(tmp_path))
    for i in range(5):
        assert reader.get(f"w{i}")[0, 0] == i


def test_non_arrays_are_refused_naming_the_key(tmp_path):
    with pytest.raises(CheckpointError, match="'w'=list"):
        save_safetensors({"w": [1.0, 2.0]}, str(tmp_path))


def test_the_index_maps_every_tensor_to_its_shard(tmp_path):
    values = {"a": np.zeros(300, np.float32), "b": np.zeros(300, np.float32)}
    save_safetensors(values, str(tmp_path), max_shard_bytes=1000)
    with open(tmp_path / "model.safetensors.index.json") as handle:
        index = json.load(handle)
    assert index["metadata"]["total_size"] == 2400
    assert index["weight_map"] == {
        "a": "model-00001-of-00002.safetensors",
        "b": "model-00002-of-00002.safetensors",
    }

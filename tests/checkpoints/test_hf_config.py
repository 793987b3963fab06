"""HFConfig: config.json with each family's defaults; unknown types refused by name."""

from __future__ import annotations

import json

import pytest

from tests.checkpoints.hf_data import fixture
from tfnorm.checkpoints import CheckpointError, HFConfig


def test_reads_the_committed_configs():
    llama = HFConfig.read(fixture("llama_gqa_llama3"))
    assert llama.model_type == "llama" and llama["num_key_value_heads"] == 2
    assert llama.rope["rope_type"] == "llama3"
    assert llama.rope["rope_theta"] == 500000.0 and llama.rope["factor"] == 8.0
    assert HFConfig.read(fixture("mistral/config.json"))["sliding_window"] is None
    assert HFConfig.read(fixture("gpt2")).rope is None
    assert HFConfig.read(fixture("bert"))["layer_norm_eps"] == 1e-12


def test_defaults_fill_what_the_file_leaves_out():
    config = HFConfig({"model_type": "llama", "hidden_size": 8}, "x/config.json")
    assert config["rms_norm_eps"] == 1e-6 and config["attention_bias"] is False
    assert config.rope == {"rope_type": "default", "rope_theta": 10000.0}
    assert HFConfig({"model_type": "gpt2"})["activation_function"] == "gelu_new"
    with pytest.raises(CheckpointError, match=r"x/config.json: .*'num_hidden_layers'"):
        config["num_hidden_layers"]


def test_old_rope_scaling_reads_as_the_new_form():
    config = HFConfig(
        {
            "model_type": "qwen2",
            "rope_theta": 1e6,
            "rope_scaling": {"type": "linear", "factor": 4.0},
        }
    )
    assert config.rope == {"rope_type": "linear", "factor": 4.0, "rope_theta": 1e6}


@pytest.mark.parametrize(
    "values, named",
    [
        ({"model_type": "mamba"}, "model_type='mamba'"),
        ({}, "model_type=None"),
        (
            {"model_type": "llama", "rope_scaling": {"rope_type": "yarn", "factor": 4}},
            "rope_scaling.rope_type='yarn'",
        ),
        (
            {"model_type": "mistral", "rope_parameters": {"rope_type": "longrope"}},
            "rope_parameters.rope_type='longrope'",
        ),
        ({"model_type": "llama", "rope_scaling": {"rope_type": "linear"}}, "factor"),
    ],
)
def test_what_tfnorm_does_not_compute_is_refused_by_name(tmp_path, values, named):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(values))
    with pytest.raises(CheckpointError) as error:
        HFConfig.read(str(tmp_path))
    text = str(error.value)
    assert named in text and str(path) in text and "\n" not in text


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(CheckpointError, match="config.json: cannot read"):
        HFConfig.read(str(tmp_path))
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="config.json: not valid JSON"):
        HFConfig.read(str(tmp_path))

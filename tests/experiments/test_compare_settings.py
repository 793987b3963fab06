"""The controls' settings of `tfnorm compare`, `tfnorm.experiments.compare_settings`."""

from __future__ import annotations

import pytest

from tfnorm.cli.main import main
from tfnorm.experiments.compare_experiment import variants
from tfnorm.experiments.compare_settings import CompareConfig
from tfnorm.settings.config_error import ConfigError


def test_the_controls_default_to_the_plain_experiment():
    config = CompareConfig().resolve()
    assert config.mixed_precision == "float32" and config.statistics == "float32"
    assert config.variable_length is False and config.variants is None


def test_the_batch_norm_control_takes_an_epsilon():
    config = CompareConfig(norm="Batch").resolve()
    assert (config.norm, config.epsilon) == ("batch", 1e-5)
    assert CompareConfig(norm="batch", epsilon=1e-3).resolve().epsilon == 1e-3


def test_variants_name_the_runs_by_position_and_warmup_in_the_order_given():
    config = CompareConfig(variants="pre:20, post", steps=100).resolve()
    # A position alone is that position without warm-up.
    assert config.variants == (("pre", 20), ("post", 0))
    names = [v["name"] for v in variants(config, config.variants)]
    assert names == ["pre-LN, warm-up 20", "post-LN, no warm-up"]


def test_the_statistics_control_compares_no_other_norm_in_the_decoder_experiment():
    # The control replaces every norm, so runs named after RMSNorm or DyT
    # would have trained the LayerNorm control.
    compute = CompareConfig(task="lm", statistics="compute").resolve()
    assert compute.norms == ("layer",)
    names = [v["name"] for v in variants(compute)]
    assert not any("RMSNorm" in name or "DynamicTanh" in name for name in names)
    assert CompareConfig(task="lm").resolve().norms == ("layer", "rms", "dyt")


@pytest.mark.parametrize(
    "values, key, message",
    [
        ({"statistics": "half"}, "statistics", "`statistics` must be one of 'float32', 'compute'"),
        ({"statistics": "compute", "norm": "rms"}, "statistics", "needs norm 'layer'. Received: statistics='compute' with norm='rms'"),
        ({"statistics": "compute", "task": "lm", "norms": ["layer", "rms"]}, "norms", "Received: norms=['layer', 'rms'] with statistics='compute'"),
        ({"mixed_precision": "bfloat16"}, "mixed_precision", "Received: mixed_precision='bfloat16'"),
        ({"variable_length": "maybe"}, "variable_length", "must be true or false. Received: variable_length='maybe'"),
        ({"variable_length": True, "task": "mlm"}, "variable_length", "Received: variable_length=True with task='mlm'"),
        ({"variants": ["pre", "sideways"]}, "variants", "Received: variants=['pre', 'sideways']"),
        ({"variants": ["pre-warmup"]}, "variants", "POSITION[:WARMUP[:RATE]]"),
        ({"norm": "group"}, "norm", "must be a norm name (layer, rms, scale, dyt or batch)"),
    ],
)  # fmt: skip
def test_bad_control_settings_name_the_setting_and_value(values, key, message):
    with pytest.raises(ConfigError) as error:
        CompareConfig.from_dict(values).resolve()
    assert error.value.key == key and message in str(error.value)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--statistics", "compute", "--norm", "dyt"], "--statistics: `statistics` 'compute' is a LayerNorm control"),
        (["--mixed-precision", "float64"], "--mixed-precision: `mixed_precision` must be one of"),
        (["--variants", "pre", "up"], "--variants: `variants` must name variants as POSITION"),
        (["--variable-length", "--task", "mlm"], "--variable-length: `variable_length` pads the reverse task"),
    ],
)  # fmt: skip
def test_bad_control_flags_are_one_line(tmp_path, capsys, argv, message):
    output_dir = tmp_path / "out"
    assert main(["compare", "--output-dir", str(output_dir), *argv]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and message in error
    assert not output_dir.exists()


@pytest.mark.parametrize(
    "values, key",
    [({"preset": "gpt2"}, "preset"), ({"task": "mlm", "bias": False}, "bias"),
     ({"init_std": 0.02}, "init_std"), ({"feed_forward": "gelu"}, "feed_forward")],
)  # fmt: skip
def test_a_decoder_setting_for_another_task_is_refused_naming_the_task(values, key):
    with pytest.raises(
        ConfigError, match=rf"^`{key}` applies to task 'lm' only"
    ) as info:
        CompareConfig.from_dict(values).resolve()
    assert info.value.key == key


def test_adams_settings_are_read_for_every_task():
    config = CompareConfig.from_dict({"beta1": "0.8", "beta2": 0.95}).resolve()
    assert (config.beta1, config.beta2, config.adam_epsilon) == (0.8, 0.95, 1e-9)
    with pytest.raises(ConfigError, match="beta2=1.0"):
        CompareConfig(beta2=1.0).resolve()

"""`TrainConfig`: one declaration per setting, resolved without mutation."""

from __future__ import annotations

import dataclasses

import pytest

from tfnorm.settings.config_error import ConfigError
from tfnorm.settings.setting import (
    FIXED,
    FREE,
    LOGGED,
    setting_of,
)
from tfnorm.training.config.config_file import load_config_file
from tfnorm.training.config.train_config import TrainConfig

KEYS = {field.name for field in dataclasses.fields(TrainConfig)}


def resolved(**values):
    return TrainConfig.from_dict({"task": "sorted", **values}).resolve()


def test_every_field_is_declared_with_help_and_a_group():
    for field in dataclasses.fields(TrainConfig):
        setting = setting_of(field)
        assert setting.help and setting.group, field.name


def test_every_setting_says_what_a_resume_may_do_with_it():
    # A new setting that declares none would be compared on resume by accident.
    for field in dataclasses.fields(TrainConfig):
        assert setting_of(field).resume in (FIXED, LOGGED, FREE), field.name


@pytest.mark.parametrize("key, value", [("num_layers", 4), ("norm", "rms")])
def test_a_classifier_setting_with_model_fn_is_refused_naming_it(key, value):
    config = TrainConfig(model_fn="m:build", data_fn="m:load", **{key: value})
    with pytest.raises(
        ConfigError, match=rf"^{key} applies to tfnorm's classifier"
    ) as info:
        config.resolve()
    assert info.value.key == key and f"Received: {key}={value!r}" in str(info.value)


def test_a_model_fn_run_resolves_without_classifier_defaults():
    config = TrainConfig(model_fn="m:build", data_fn="m:load").resolve()
    assert config.dff is None and config.norm is None
    assert config.resolve() is config
    # A copy with a changed path (as the run makes its paths absolute) is
    # checked again: no classifier default may have been filled in.
    moved = dataclasses.replace(config, logdir="/elsewhere/run").resolve()
    assert moved.norm is None and moved.logdir == "/elsewhere/run"


def test_resolve_returns_a_new_config_and_leaves_the_original_alone():
    config = TrainConfig(task="sorted", devices="/gpu:0, /gpu:1")
    result = config.resolve()
    assert result is not config
    assert config.dff is None and config.checkpoint_dir is None
    assert config.devices == "/gpu:0, /gpu:1"
    assert result.dff == 4 * result.d_model
    assert result.checkpoint_dir.endswith("checkpoints")
    assert result.devices == ["/gpu:0", "/gpu:1"]
    # The old name still works and resolving twice changes nothing.
    assert config.validate() == result == result.resolve()


def test_a_resolved_config_is_not_checked_again_until_a_value_changes(
    config_checks,
):
    result = resolved(epochs=1)
    assert result.is_resolved() and not TrainConfig(task="sorted").is_resolved()
    assert result.resolve() is result and result.validate() is result
    assert len(config_checks) == 1
    # A copy with another value, or a value set afterwards, is checked again.
    assert not dataclasses.replace(result, epochs=3).is_resolved()
    assert dataclasses.replace(result, epochs=3).resolve().epochs == 3
    result.epochs = True  # == 1, but not an integer setting
    assert not result.is_resolved()
    with pytest.raises(ConfigError, match="epochs"):
        result.resolve()
    assert len(config_checks) == 2


def test_strings_are_read_like_flags():
    config = resolved(
        learning_rate="1e-3", epochs="3", export="false", clipnorm="none", seed="7"
    )
    assert config.learning_rate == 0.001 and config.epochs == 3
    assert config.export is False and config.clipnorm is None and config.seed == 7


@pytest.mark.parametrize(
    "alias, mode",
    [("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16"), (None, "float32")],
)
def test_precision_aliases_resolve_to_modes(alias, mode):
    assert resolved(mixed_precision=alias).mixed_precision == mode


def test_num_classes_defaults_to_3_for_tasks_and_stays_unset_for_files(tmp_path):
    assert resolved().num_classes == 3
    data = tmp_path / "train.csv"
    data.write_text("text,label\na,0\n")
    assert TrainConfig(data=str(data)).resolve().num_classes is None


@pytest.mark.parametrize(
    "values, key",
    [
        ({"dropout_rate": 1.0}, "dropout_rate"),
        ({"seed": 2**32}, "seed"),
        ({"max_len": 1}, "max_len"),
        ({"logdir": ""}, "logdir"),
        ({"val_data": "v.csv"}, "val_data"),
    ],
)
def test_bad_values_name_their_key_and_value(values, key):
    with pytest.raises(ConfigError) as info:
        resolved(**values)
    assert info.value.key == key
    assert "Received:" in str(info.value) and "\n" not in str(info.value)


def test_config_files_may_start_with_a_byte_order_mark(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_bytes("\ufefftask: sorted\n".encode())
    assert load_config_file(path, KEYS) == {"task": "sorted"}


def test_config_file_bad_utf8_names_the_line(tmp_path):
    path = tmp_path / "run.json"
    path.write_bytes(b'{\n"task":\n"caf\xe9"}\n')
    with pytest.raises(ConfigError, match=r"run\.json, line 3: not UTF-8"):
        load_config_file(path, KEYS)


def test_val_split_defaults_to_a_tenth_of_a_file_without_validation(tmp_path):
    from tfnorm.training.config.train_config import RESUME_KEYS

    data = tmp_path / "train.csv"
    data.write_text("text,label\na,0\n")
    assert TrainConfig(data=str(data)).resolve().val_split == 0.1
    assert TrainConfig(data=str(data), val_split="0").resolve().val_split == 0.0
    assert (
        TrainConfig(data=str(data), val_split=0.3).resolve().resolve().val_split == 0.3
    )
    assert TrainConfig(data=str(data), val_data=str(data)).resolve().val_split is None
    assert resolved().val_split is None and resolved(val_split=0).val_split == 0
    assert "val_split" in RESUME_KEYS


@pytest.mark.parametrize(
    "values, message",
    [
        ({"val_split": 1}, r"`val_split` must be"),
        ({"val_split": -0.1}, r"`val_split` must be"),
        ({"val_split": "a"}, r"`val_split` must be"),
        ({"val_split": 0.1, "val_data": "VAL"}, r"when no val_data"),
        ({"val_split": 0.1, "data": None, "task": "sorted"}, r"synthetic tasks"),
    ],
)
def test_bad_val_split_names_the_key(tmp_path, values, message):
    data = tmp_path / "train.csv"
    data.write_text("text,label\na,0\n")
    settings = {"data": str(data), **values}
    if settings.get("val_data") == "VAL":
        settings["val_data"] = str(data)
    with pytest.raises(ConfigError, match=message) as caught:
        TrainConfig.from_dict(settings).resolve()
    assert caught.value.key == "val_split"


def test_an_unreadable_config_file_is_a_config_error(tmp_path, monkeypatch):
    # chmod 000 does not stop root; a refused open is what a user would meet.
    path = tmp_path / "run.yaml"
    path.write_text("task: sorted\n")
    real_open = open

    def refusing_open(file, *args, **kwargs):
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", refusing_open)
    with pytest.raises(
        ConfigError, match=r"run\.yaml cannot be read: Permission denied"
    ):
        load_config_file(path, KEYS)


@pytest.mark.parametrize(
    "text, value",
    [
        ("seed: 10\n", 10),
        ("seed: 0\n", 0),
        ("seed: 0x10\n", 16),
        ('seed: "010"\n', "010"),
    ],
)
def test_plain_yaml_integers_and_quoted_strings_are_read_as_written(
    tmp_path, text, value
):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    assert load_config_file(path, KEYS) == {"seed": value}


@pytest.mark.parametrize(
    "text",
    [
        "seed: 010\n",
        "seed: -07\n",
        "seed: 1:30\n",
        "norm: {class_name: LayerNormalization, config: {axis: [01]}}\n",
    ],
)
def test_yaml_integers_read_otherwise_than_as_a_flag_are_refused(tmp_path, text):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    with pytest.raises(
        ConfigError, match=r"run\.yaml, line 1: YAML 1\.1 reads"
    ) as caught:
        load_config_file(path, KEYS)
    assert caught.value.key == text.split(":")[0]

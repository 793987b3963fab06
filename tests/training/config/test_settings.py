"""The readers behind `TrainConfig`'s declarations: one path for flags and files."""

from __future__ import annotations

import os

import pytest

from tfnorm.training.config import settings
from tfnorm.training.config.settings import ConfigError, Setting, device_list


@pytest.mark.parametrize("given", [5, "5", " 5 ", "+5"])
def test_integer_reads_ints_and_their_text(given):
    assert settings.integer(1)("epochs", given) == 5


@pytest.mark.parametrize("given", [True, 5.0, "5.0", "1e3", "five", [5], None])
def test_integer_refuses_everything_else(given):
    with pytest.raises(ValueError, match=r"`epochs` must be an integer"):
        settings.integer(1)("epochs", given)


@pytest.mark.parametrize("given", [1e-3, "1e-3", "0.001", 1])
def test_number_reads_numbers_and_their_text(given):
    assert settings.number(above=0.0)("learning_rate", given) == pytest.approx(
        1e-3 if given != 1 else 1.0
    )


@pytest.mark.parametrize("given", ["nan", float("inf"), "-inf", True, "fast", 0])
def test_number_refuses_non_finite_bools_text_and_bounds(given):
    with pytest.raises(
        ValueError, match=r"`learning_rate` must be a finite number > 0"
    ):
        settings.number(above=0.0)("learning_rate", given)


def test_optional_settings_take_none_and_their_off_values():
    clip = Setting(
        "g", "h", settings.number(above=0.0), optional=True, off=("off", 0, False)
    )
    for off in (None, "none", "None", "off", 0, 0.0, False):
        assert clip.parse("clipnorm", off) is None, off
    assert clip.parse("clipnorm", "2") == 2.0
    with pytest.raises(ConfigError, match="clipnorm=True"):
        clip.parse("clipnorm", True)


def test_required_settings_refuse_none():
    with pytest.raises(ConfigError) as info:
        Setting("g", "h", settings.integer(1)).parse("d_model", "none")
    assert info.value.key == "d_model" and "d_model=None" in str(info.value)


def test_creatable_paths(tmp_path):
    directory = settings.creatable("directory")
    assert directory("logdir", str(tmp_path / "a" / "b")) == str(tmp_path / "a" / "b")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"must be a directory, but .* is a file"):
        directory("logdir", str(tmp_path / "file"))
    with pytest.raises(ValueError, match=r"cannot be created: .*file' is a file"):
        directory("logdir", str(tmp_path / "file" / "sub"))
    with pytest.raises(ValueError, match=r"must be a file, but .* is a directory"):
        settings.creatable("file")("log_file", str(tmp_path))


def test_name_lists_from_text_or_lists():
    assert settings.name_list("devices", "/gpu:0, /gpu:1") == ["/gpu:0", "/gpu:1"]
    assert settings.name_list("devices", ("/cpu:0",)) == ["/cpu:0"]
    for bad in ("", [], [1], {"a": 1}):
        with pytest.raises(ValueError, match="devices="):
            settings.name_list("devices", bad)


@pytest.mark.parametrize(
    "value", ["/cpu:0\n/cpu:1", ["/gpu:0 /gpu:1"], "cpu", ["/gpu:0\nListenAddress"]]
)
def test_device_names_follow_tensorflows_grammar(value):
    with pytest.raises(
        ValueError, match=r"`devices` must list device names .* is not one"
    ):
        device_list("devices", value)


@pytest.mark.parametrize(
    "value",
    [
        "/gpu:0,/gpu:1",
        "GPU:0",
        "/device:CPU:0",
        "/job:worker/replica:0/task:1/device:GPU:0",
    ],
)
def test_tensorflow_device_names_are_accepted(value):
    assert device_list("devices", value) == value.split(",")


def _refusing_open(monkeypatch, refused):
    real_open = open

    def refusing(file, *args, **kwargs):
        if str(file) == str(refused):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", refusing)


def test_an_unreadable_data_file_is_refused_naming_the_key(tmp_path, monkeypatch):
    # chmod 000 does not stop root; a refused open stands in for it.
    path = tmp_path / "train.csv"
    path.write_text("text,label\na,0\n")
    _refusing_open(monkeypatch, path)
    with pytest.raises(ValueError, match=r"`data` cannot be read: Permission denied"):
        settings.existing_file("data", str(path))


def test_a_fifo_as_data_file_is_refused_without_opening_it(tmp_path):
    path = tmp_path / "train.csv"
    os.mkfifo(path)
    with pytest.raises(
        ValueError, match=r"`data` must name a file \(it is not a regular file"
    ):
        settings.existing_file("data", str(path))

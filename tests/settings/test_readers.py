"""The generic readers a `Setting` names: one path for flags, files and notebooks."""

from __future__ import annotations

import os

import pytest

from tfnorm.settings import readers
from tfnorm.settings.readers import device_list


@pytest.mark.parametrize("given", [5, "5", " 5 ", "+5"])
def test_integer_reads_ints_and_their_text(given):
    assert readers.integer(1)("epochs", given) == 5


@pytest.mark.parametrize("given", [True, 5.0, "5.0", "1e3", "five", [5], None])
def test_integer_refuses_everything_else(given):
    with pytest.raises(ValueError, match=r"`epochs` must be an integer"):
        readers.integer(1)("epochs", given)


@pytest.mark.parametrize("given", [1e-3, "1e-3", "0.001", 1])
def test_number_reads_numbers_and_their_text(given):
    assert readers.number(above=0.0)("learning_rate", given) == pytest.approx(
        1e-3 if given != 1 else 1.0
    )


@pytest.mark.parametrize("given", ["nan", float("inf"), "-inf", True, "fast", 0])
def test_number_refuses_non_finite_bools_text_and_bounds(given):
    with pytest.raises(
        ValueError, match=r"`learning_rate` must be a finite number > 0"
    ):
        readers.number(above=0.0)("learning_rate", given)


def test_creatable_paths(tmp_path):
    directory = readers.creatable("directory")
    assert directory("logdir", str(tmp_path / "a" / "b")) == str(tmp_path / "a" / "b")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"must be a directory, but .* is a file"):
        directory("logdir", str(tmp_path / "file"))
    with pytest.raises(ValueError, match=r"cannot be created: .*file' is a file"):
        directory("logdir", str(tmp_path / "file" / "sub"))
    with pytest.raises(ValueError, match=r"must be a file, but .* is a directory"):
        readers.creatable("file")("log_file", str(tmp_path))


def test_name_lists_from_text_or_lists():
    assert readers.name_list("devices", "/gpu:0, /gpu:1") == ["/gpu:0", "/gpu:1"]
    assert readers.name_list("devices", ("/cpu:0",)) == ["/cpu:0"]
    for bad in ("", [], [1], {"a": 1}):
        with pytest.raises(ValueError, match="devices="):
            readers.name_list("devices", bad)


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
        readers.existing_file("data", str(path))


def test_a_fifo_as_data_file_is_refused_without_opening_it(tmp_path):
    path = tmp_path / "train.csv"
    os.mkfifo(path)
    with pytest.raises(
        ValueError, match=r"`data` must name a file \(it is not a regular file"
    ):
        readers.existing_file("data", str(path))

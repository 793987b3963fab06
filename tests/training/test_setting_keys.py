"""Errors of the library name a setting by its key, what a notebook passes
to `TrainConfig` or `train`, not by the flag of `tfnorm train` (the command
line renames keys to flags itself: tests/cli)."""

from __future__ import annotations

import io
import re

import pytest

from tfnorm.inference.prediction import PredictionError, Predictor
from tfnorm.settings.config_error import ConfigError
from tfnorm.training import train
from tfnorm.training.config.config_file import load_config_file
from tfnorm.training.config.train_config import TrainConfig
from tfnorm.training.data import DataError

FLAG = re.compile(r"(?<![\w-])--[a-z]")
TINY = dict(max_len=6, num_layers=1, d_model=8, num_heads=2, dff=16, batch_size=4)


def assert_names_keys_not_flags(error, *phrases):
    message = str(error)
    assert not FLAG.search(message), message
    for phrase in phrases:
        assert phrase in message, message


@pytest.mark.parametrize(
    "values, phrases",
    [
        ({"task": "sorted", "val_split": 0.2}, ["val_split splits data;"]),
        ({"model_fn": "m:f"}, ["model_fn and data_fn go together"]),
        ({}, ["a synthetic task (task, one of", "a file (data)"]),
    ],
    ids=["val_split_without_data", "model_fn_alone", "no_data_source"],
)
def test_a_bad_train_config_names_the_keys(values, phrases):
    with pytest.raises(ConfigError) as info:
        TrainConfig.from_dict(values).resolve()
    assert_names_keys_not_flags(info.value, *phrases)


def test_a_missing_config_file_is_named_by_its_key(tmp_path):
    path = str(tmp_path / "run.yaml")
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert_names_keys_not_flags(info.value, f"Received: config={path!r}")


def test_train_names_the_checkpoint_dir_key_for_foreign_checkpoints(tmp_path):
    checkpoints = tmp_path / "ckpt"
    checkpoints.mkdir()
    (checkpoints / "run_config.json").write_text("[]")
    config = TrainConfig(
        task="sorted",
        logdir=str(tmp_path / "run"),
        checkpoint_dir=str(checkpoints),
        **TINY,
    )
    with pytest.raises(ConfigError) as info:
        train(config, handle_signals=False, stdout=io.StringIO())
    assert info.value.key == "checkpoint_dir"
    assert_names_keys_not_flags(info.value, "use another checkpoint_dir to start")


def test_train_names_the_num_classes_key_for_a_label_out_of_range(tmp_path):
    data = tmp_path / "t.csv"
    data.write_text("text,label\na b,0\nc d,3\n")
    config = TrainConfig(
        data=str(data), num_classes=3, logdir=str(tmp_path / "run"), **TINY
    )
    with pytest.raises(DataError) as info:
        train(config, handle_signals=False, stdout=io.StringIO())
    assert_names_keys_not_flags(info.value, "label 3 is not below num_classes 3")


def test_predictor_names_the_logdir_key_of_a_missing_run(tmp_path):
    with pytest.raises(PredictionError) as info:
        Predictor(tmp_path / "nowhere")
    assert_names_keys_not_flags(info.value, "give the logdir of a finished")

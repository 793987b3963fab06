"""`tfnorm.training.rundir.paths`: a run's directories and this process's role."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from tfnorm.settings.config_error import ConfigError
from tfnorm.training.config.train_config import TrainConfig
from tfnorm.training.rundir.paths import CHIEF, WORKER, RunPaths

TWO_WORKERS = {"worker": ["localhost:2001", "localhost:2002"]}
WITH_CHIEF = {"chief": ["localhost:2000"], "worker": ["localhost:2001"]}


def resolved(tmp_path, **values):
    return TrainConfig(task="sorted", logdir=str(tmp_path / "run"), **values).resolve()


def environ(cluster, task_type, index):
    task = {"type": task_type, "index": index}
    return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": task})}


def test_without_a_cluster_the_process_is_the_chief_and_keeps_everything(tmp_path):
    log_file = str(tmp_path / "train.log")
    paths = RunPaths.from_config(resolved(tmp_path, log_file=log_file), {})
    logdir = str(tmp_path / "run")
    checkpoint_dir = os.path.join(logdir, "checkpoints")
    assert paths == RunPaths(logdir, checkpoint_dir, log_file)
    assert (paths.role, paths.task_type, paths.scratch_dir) == (CHIEF, None, None)
    assert paths.owns_directories
    assert paths.own_checkpoint_dir == checkpoint_dir
    assert paths.export_dir == paths.tensorboard_dir == logdir
    assert paths.directories() == (
        ("logdir", logdir),
        ("checkpoint_dir", checkpoint_dir),
    )


def test_the_checkpoint_dir_setting_is_used_as_resolved(tmp_path):
    config = resolved(tmp_path, checkpoint_dir=str(tmp_path / "elsewhere"))
    paths = RunPaths.from_config(config, {})
    assert paths.checkpoint_dir == config.checkpoint_dir == str(tmp_path / "elsewhere")
    assert paths.logdir == config.logdir and paths.log_file is None


def test_worker_0_of_a_cluster_without_a_chief_is_the_chief(tmp_path):
    paths = RunPaths.from_config(resolved(tmp_path), environ(TWO_WORKERS, "worker", 0))
    assert (paths.role, paths.task_type, paths.task_index) == (CHIEF, "worker", 0)
    assert paths.owns_directories and paths.scratch_dir is None
    assert paths.own_checkpoint_dir == paths.checkpoint_dir


def test_another_worker_writes_only_into_its_scratch_directory(tmp_path):
    paths = RunPaths.from_config(resolved(tmp_path), environ(TWO_WORKERS, "worker", 1))
    scratch = os.path.join(str(tmp_path / "run"), "checkpoints", ".worker_1")
    assert (paths.role, paths.task_type, paths.task_index) == (WORKER, "worker", 1)
    assert not paths.owns_directories
    assert paths.scratch_dir == paths.own_checkpoint_dir == paths.export_dir == scratch
    assert paths.tensorboard_dir is None
    # It still restores from, and names, the run's own directories.
    assert paths.checkpoint_dir == os.path.dirname(scratch)
    assert paths.logdir == str(tmp_path / "run")


def test_with_a_chief_task_worker_0_is_a_worker(tmp_path):
    config = resolved(tmp_path)
    chief = RunPaths.from_config(config, environ(WITH_CHIEF, "chief", 0))
    worker = RunPaths.from_config(config, environ(WITH_CHIEF, "worker", 0))
    assert (chief.role, chief.task_type, chief.scratch_dir) == (CHIEF, "chief", None)
    assert worker.role == WORKER
    assert worker.scratch_dir == os.path.join(config.checkpoint_dir, ".worker_0")


def test_tf_config_is_read_from_the_environment_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", environ(TWO_WORKERS, "worker", 1)["TF_CONFIG"])
    assert RunPaths.from_config(resolved(tmp_path)).role == WORKER
    monkeypatch.delenv("TF_CONFIG")
    assert RunPaths.from_config(resolved(tmp_path)).role == CHIEF


@pytest.mark.parametrize(
    "text, reason",
    [
        ("{not json", "TF_CONFIG is not valid JSON"),
        ('{"cluster": {"worker": ["h:1"]}}', "TF_CONFIG needs a 'task' object"),
        (
            json.dumps(
                {"cluster": TWO_WORKERS, "task": {"type": "worker", "index": 2}}
            ),
            "TF_CONFIG task index is out of range",
        ),
    ],
)
def test_a_malformed_tf_config_is_refused_naming_it(tmp_path, text, reason):
    with pytest.raises(ConfigError, match=reason) as info:
        RunPaths.from_config(resolved(tmp_path), {"TF_CONFIG": text})
    assert info.value.key is None  # not a setting: the environment's
    assert "Received:" in str(info.value)


def test_the_value_cannot_change_during_a_run(tmp_path):
    paths = RunPaths.from_config(resolved(tmp_path), {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        paths.logdir = str(tmp_path / "other")

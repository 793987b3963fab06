"""`tfnorm.training.rundir.run_identity`: run_config.json and which runs may resume."""

from __future__ import annotations

import os

import pytest

from tfnorm._safe_io import file_sha256
from tfnorm.settings.config_error import ConfigError
from tfnorm.training.config.train_config import TrainConfig
from tfnorm.training.rundir import run_identity
from tfnorm.training.rundir.paths import RunPaths


def config(tmp_path, **overrides):
    values = dict(task="sorted", logdir=str(tmp_path / "run"))
    values.update(overrides)
    return TrainConfig.from_dict(values).validate()


def test_run_config_holds_the_settings_and_the_identity(tmp_path):
    cfg = config(tmp_path)
    os.makedirs(cfg.checkpoint_dir)
    identity = {"data_sha256": None, "vocab_size": 17, "num_classes": 3}
    run_identity.write_run_config(RunPaths.from_config(cfg, {}), cfg, identity)
    saved = run_identity.read_run_config(cfg.checkpoint_dir)
    assert saved["d_model"] == cfg.d_model and saved["run_identity"] == identity


def test_a_garbled_run_config_is_a_clear_error(tmp_path):
    cfg = config(tmp_path)
    os.makedirs(cfg.checkpoint_dir)
    with open(os.path.join(cfg.checkpoint_dir, "run_config.json"), "w") as handle:
        handle.write("{not json")
    with pytest.raises(ConfigError, match="run_config.json cannot be read"):
        run_identity.read_run_config(cfg.checkpoint_dir)


def test_other_settings_are_refused_by_name(tmp_path):
    saved = dict(config(tmp_path).to_dict(), d_model=32)
    with pytest.raises(ConfigError, match="d_model: checkpoint 32, now 64") as info:
        run_identity.check_same_run(config(tmp_path), saved, None)
    assert info.value.key == "checkpoint_dir"


def test_changed_data_contents_are_refused_naming_the_file(tmp_path):
    data = tmp_path / "train.csv"
    data.write_text("text,label\na,0\n")
    cfg = config(tmp_path, task=None, data=str(data))
    saved = dict(cfg.to_dict(), run_identity={"data_sha256": "0" * 64})
    now = file_sha256(str(data))
    run_identity.check_same_run(
        cfg, dict(saved, run_identity={"data_sha256": now}), now
    )
    with pytest.raises(ConfigError, match=r"train\.csv changed since") as info:
        run_identity.check_same_run(cfg, saved, now)
    assert info.value.key == "data"


def test_run_config_and_vocabulary_replace_a_link_without_writing_through_it(
    tmp_path,
):
    from tfnorm.training.data import save_vocabulary

    cfg = config(tmp_path)
    os.makedirs(cfg.checkpoint_dir)
    secret = tmp_path / "notes.txt"
    secret.write_text("mine\n")
    for name in ("run_config.json", "vocabulary.json", "vocabulary.json.tmp"):
        os.symlink(secret, os.path.join(cfg.checkpoint_dir, name))
    run_identity.write_run_config(
        RunPaths.from_config(cfg, {}), cfg, {"data_sha256": None}
    )
    save_vocabulary(["good"], cfg.checkpoint_dir)
    assert secret.read_text() == "mine\n"
    assert run_identity.read_run_config(cfg.checkpoint_dir)["task"] == "sorted"


def test_a_run_config_that_is_not_a_mapping_is_an_error_naming_the_file(tmp_path):
    # `[]` was read as "no settings": any run resumed these checkpoints.
    cfg = config(tmp_path)
    os.makedirs(cfg.checkpoint_dir)
    with open(os.path.join(cfg.checkpoint_dir, "run_config.json"), "w") as handle:
        handle.write("[]")
    with pytest.raises(
        ConfigError, match=r"run_config\.json holds a JSON list, not"
    ) as info:
        run_identity.read_run_config(cfg.checkpoint_dir)
    assert info.value.key == "checkpoint_dir"


def _data_config(tmp_path, **overrides):
    data = tmp_path / "train.csv"
    if not data.exists():
        data.write_text("text,label\na,0\n")
    overrides.setdefault("data", str(data))
    return config(tmp_path, task=None, **overrides)


@pytest.mark.parametrize("saved_of", [
    lambda cfg: cfg.to_dict(),  # run_config.json of the previous release
    lambda cfg: dict(cfg.to_dict(), run_identity=None),
    lambda cfg: dict(cfg.to_dict(), run_identity={"vocab_size": 9}),
    lambda cfg: None,  # checkpoints without run_config.json
])  # fmt: skip
def test_text_checkpoints_without_a_data_hash_are_not_resumed(tmp_path, saved_of):
    cfg = _data_config(tmp_path)
    now = file_sha256(cfg.data)
    with pytest.raises(
        ConfigError, match=r"record no SHA-256 of their training file"
    ) as info:
        run_identity.check_same_run(cfg, saved_of(cfg), now)
    assert info.value.key == "data"
    # The way on is in the message: the line to add, with the hash.
    assert f'"run_identity": {{"data_sha256": "{now}"}}' in str(info.value)
    assert "another checkpoint_dir;" in str(info.value)


def test_synthetic_checkpoints_without_an_identity_still_resume(tmp_path):
    cfg = config(tmp_path)
    run_identity.check_same_run(cfg, cfg.to_dict(), None)


@pytest.mark.parametrize("saved_values, now_values", [
    ({"data": "./train.csv"}, {"data": "train.csv"}),
    ({"data": "{tmp}/../{name}/train.csv"}, {"data": "train.csv"}),
    ({"vocab_size": None}, {"vocab_size": 20000}),
    ({"norm": "layer"}, {"norm": "LayerNormalization"}),
    ({"norm": "rms"}, {"norm": "rmsnorm"}),
    ({"num_classes": None}, {"num_classes": 2}),
])  # fmt: skip
def test_the_same_run_spelled_otherwise_resumes(
    tmp_path, monkeypatch, saved_values, now_values
):
    monkeypatch.chdir(tmp_path)

    def spelled(values):
        return {
            key: value.format(tmp=tmp_path, name=tmp_path.name)
            if isinstance(value, str)
            else value
            for key, value in values.items()
        }

    base = _data_config(tmp_path)
    now = file_sha256(base.data)
    identity = {"data_sha256": now, "vocab_size": 5, "num_classes": 2}
    cfg = _data_config(tmp_path, **spelled(now_values))
    saved = dict(base.to_dict(), **spelled(saved_values), run_identity=identity)
    run_identity.check_same_run(cfg, saved, now)


def test_a_data_path_of_another_file_is_still_refused(tmp_path):
    cfg = _data_config(tmp_path)
    now = file_sha256(cfg.data)
    saved = dict(
        cfg.to_dict(), data="other.csv", run_identity={"data_sha256": "0" * 64}
    )
    with pytest.raises(ConfigError, match=r"data: checkpoint 'other\.csv'"):
        run_identity.check_same_run(cfg, saved, now)


class _Lines:
    def __init__(self):
        self.lines = []

    def line(self, text):
        self.lines.append(text)


def test_changed_epsilon_and_dropout_are_logged_in_one_line(tmp_path):
    cfg = config(tmp_path, epsilon=1e-6, dropout_rate=0.0)
    saved = dict(cfg.to_dict(), epsilon=None, dropout_rate=0.1)
    log = _Lines()
    run_identity.check_same_run(cfg, saved, None, log)
    assert log.lines == [
        "resuming with changed settings: dropout_rate 0.1 -> 0.0, epsilon None "
        "-> 1e-06 (the checkpoint's weights are kept; these apply from here on)"
    ]
    log = _Lines()
    run_identity.check_same_run(cfg, cfg.to_dict(), None, log)
    assert log.lines == []

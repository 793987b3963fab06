"""`tfnorm.training.rundir`'s run files: progress log, run identity, vocabulary, summary."""

from __future__ import annotations

import io
import json
import os

import pytest

from tfnorm._safe_io import file_sha256
from tfnorm.training.config.settings import ConfigError
from tfnorm.training.config.train_config import TrainConfig
from tfnorm.training.rundir import export, outputs, progress_log, run_identity
from tfnorm.training.rundir.paths import RunPaths


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize(
    "stream_class, expect_bar", [(_Terminal, True), (io.StringIO, False)]
)
def test_progress_bar_only_when_stdout_is_a_terminal(
    tmp_path, stream_class, expect_bar
):
    stream = stream_class()
    log_file = tmp_path / "progress.log"
    with progress_log.ProgressLog(stream, str(log_file)) as log:
        log.open_file()
        log.bar(3, 10, "step 3/10")
        log.line("step 3/10 loss 0.5")
        log.bar(4, 10, "step 4/10")
    shown = stream.getvalue()
    assert ("[#######" in shown and "\r" in shown) is expect_bar
    assert "step 3/10 loss 0.5\n" in shown
    # The log file gets whole lines only, never the bar.
    assert log_file.read_text().count("\n") == 1 and "\r" not in log_file.read_text()


def test_log_file_is_created_only_when_opened_and_gets_earlier_lines(tmp_path):
    log_file = tmp_path / "logs" / "train.log"
    with progress_log.ProgressLog(io.StringIO(), str(log_file)) as log:
        log.line("ignoring vocabulary.json")
        assert not (tmp_path / "logs").exists()
        log.open_file()
        log.line("starting from step 0")
    lines = log_file.read_text().splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == [
        "ignoring vocabulary.json",
        "starting from step 0",
    ]


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


def test_a_vocabulary_counts_only_together_with_a_checkpoint(tmp_path):
    from tfnorm.training.data import save_vocabulary

    save_vocabulary(["good", "day"], str(tmp_path))
    assert outputs.saved_vocabulary(str(tmp_path), True) == (["good", "day"], None)
    vocabulary, note = outputs.saved_vocabulary(str(tmp_path), False)
    assert vocabulary is None and "no checkpoint goes with it" in note


def test_summary_is_written_atomically_as_json(tmp_path):
    paths = RunPaths(str(tmp_path), str(tmp_path / "checkpoints"))
    path = outputs.write_summary(paths, {"status": "completed", "n": 1})
    assert json.loads(open(path).read()) == {"status": "completed", "n": 1}
    assert os.listdir(tmp_path) == ["summary.json"]


def test_every_status_has_an_exit_status():
    assert outputs.EXIT_STATUS["completed"] == 0
    assert len(set(outputs.EXIT_STATUS.values())) == len(outputs.EXIT_STATUS)
    assert 2 not in outputs.EXIT_STATUS.values()  # the CLI's "bad input"


def test_a_symlinked_log_file_is_refused_and_its_target_left_as_it_was(tmp_path):
    secret = tmp_path / "notes.txt"
    secret.write_text("mine\n")
    log_file = tmp_path / "train.log"
    log_file.symlink_to(secret)
    log = progress_log.ProgressLog(io.StringIO(), str(log_file))
    log.line("starting")
    with pytest.raises(OSError, match="train.log is a symbolic link"):
        log.open_file()
    log.close()
    assert secret.read_text() == "mine\n"


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


class _ClosedPipe(io.StringIO):
    """stdout after `| head -2` exited (EPIPE) or a terminal closed (EIO)."""

    def __init__(self, error):
        super().__init__()
        self.error = error
        self.writes = 0

    def write(self, text):
        self.writes += 1
        raise self.error


@pytest.mark.parametrize(
    "error",
    [BrokenPipeError(32, "Broken pipe"), OSError(5, "Input/output error")],
    ids=["EPIPE", "EIO"],
)
def test_a_closed_stdout_is_dropped_and_the_log_file_kept(tmp_path, error):
    stream = _ClosedPipe(error)
    log_file = tmp_path / "train.log"
    with progress_log.ProgressLog(stream, str(log_file)) as log:
        log.open_file()
        log.line("step 1/10")  # must not raise
        log.bar(2, 10, "step 2/10")
        log.line("step 2/10")
    assert stream.writes == 1  # never tried again
    lines = log_file.read_text().splitlines()
    assert "step 1/10" in lines[0] and "step 2/10" in lines[-1]
    assert any("stdout" in line and "log file only" in line for line in lines)


def test_the_hangup_status_exits_129():
    assert outputs.EXIT_STATUS["hangup"] == 129


@pytest.mark.parametrize(
    "content", [b'["good", ', b"{}", b"[1, 2]", b"\xff\xfe", b""], ids=repr
)
def test_a_damaged_vocabulary_beside_a_checkpoint_is_a_clear_error(tmp_path, content):
    (tmp_path / "vocabulary.json").write_bytes(content)
    with pytest.raises(ConfigError, match=r"vocabulary\.json cannot be read") as info:
        outputs.saved_vocabulary(str(tmp_path), True)
    assert info.value.key == "checkpoint_dir"
    # Without a checkpoint it would not be used anyway: a note, no error.
    vocabulary, note = outputs.saved_vocabulary(str(tmp_path), False)
    assert vocabulary is None and "vocabulary.json" in note


def test_the_export_replaces_a_link_planted_during_the_run(tmp_path):
    from tfnorm import _keras

    if _keras.NATIVE_FORMAT == "tf":
        pytest.skip("a SavedModel directory is checked, not renamed (TF 2.9)")
    secret = tmp_path / "notes.txt"
    secret.write_text("mine\n")
    path = _keras.model_path(str(tmp_path / "model"), _keras.NATIVE_FORMAT)
    os.symlink(secret, path)
    inputs = _keras.keras.Input((3,))
    model = _keras.keras.Model(inputs, _keras.keras.layers.Dense(2)(inputs))
    assert export.export_model(model, str(tmp_path)).path == path
    assert secret.read_text() == "mine\n" and not os.path.islink(path)
    assert sorted(os.listdir(tmp_path)) == sorted(["notes.txt", os.path.basename(path)])
    _keras.keras.models.load_model(path)


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

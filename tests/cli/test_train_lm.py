"""`tfnorm train --task lm`: the command end to end, bad text and settings as
one line, and kill -9 of a language-model run resuming exactly."""

from __future__ import annotations

import json
import signal

import pytest

from tests.cli.test_train_faults import kill_9_trials
from tests.training.workloads.test_language_model import corpus_text
from tfnorm.cli.main import main

MODEL_FLAGS = [
    "--max-len", "16", "--num-layers", "1", "--d-model", "16", "--num-heads", "2",
    "--dff", "32", "--batch-size", "8", "--histogram-every", "0",
]  # fmt: skip


def text_directory(tmp_path):
    directory = tmp_path / "texts"
    directory.mkdir()
    text = corpus_text()
    (directory / "a.txt").write_text(text[:6000], encoding="utf-8")
    (directory / "b.txt").write_text(text[6000:], encoding="utf-8")
    (directory / "README.md").write_text("not read", encoding="utf-8")
    return directory


def test_a_directory_of_text_trains_exports_and_reports_bits_per_byte(tmp_path, capsys):
    directory = text_directory(tmp_path)
    logdir = tmp_path / "run"
    argv = ["train", "--task", "lm", "--data", str(directory), *MODEL_FLAGS]
    argv += ["--preset", "gpt2", "--norm-position", "post", "--val-split", "0.2"]
    argv += ["--steps-per-epoch", "4", "--logdir", str(logdir)]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "from 2 text files" in out and "val_bits_per_byte" in out
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["export"]["kind"] == "model"
    assert [p.rsplit("/", 1)[-1] for p in summary["data"]["files"]] == [
        "a.txt",
        "b.txt",
    ]
    assert summary["data"]["val_split"] == 0.2
    assert summary["metrics"]["val_bits_per_byte"] > 0
    recipe = json.loads((logdir / "language_model.json").read_text())
    assert recipe["build_decoder"]["norm_position"] == "post"
    assert recipe["build_decoder"]["preset"] == "gpt2"


def test_several_files_are_given_after_one_flag(tmp_path, capsys):
    directory = text_directory(tmp_path)
    argv = ["train", "--task", "lm", "--data", str(directory / "b.txt")]
    argv += [str(directory / "a.txt"), "--print-config"]
    assert main(argv) == 0
    config = json.loads(capsys.readouterr().out)
    assert config["data"] == [str(directory / "b.txt"), str(directory / "a.txt")]
    assert config["preset"] == "llama" and config["norm"] is None


def bad_text(tmp_path, content):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    return ["--data", str(path)]


BAD = [
    ("empty file", lambda t: bad_text(t, b""), r"bad\.txt: the file is empty"),
    ("not utf-8", lambda t: bad_text(t, b"ok\n\xc3\x28 text"), r"bad\.txt, line 2, byte 3: not UTF-8"),
    ("shorter than a context", lambda t: bad_text(t, b"tiny"), r"shorter than one window of 17 tokens \(a context of --max-len 16"),
    ("no data", lambda t: [], r"--task lm trains on text: give data \(--data\)"),
    ("val split leaves no window", lambda t: bad_text(t, b"x" * 99) + ["--val-split", "0.9999"], r"bad\.txt: --val-split 0\.9999 holds out 100 of the 100 tokens, .* lower val_split \(--val-split\)\. Received: val_split=0\.9999$"),
    ("a classifier setting", lambda t: bad_text(t, b"x" * 99) + ["--pooling", "cls"], r"--pooling .*applies to tfnorm's classifier only"),
]  # fmt: skip


@pytest.mark.parametrize(
    "make, expected", [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_bad_text_and_settings_are_one_line_and_nothing_is_written(
    tmp_path, capsys, make, expected
):
    logdir = tmp_path / "run"
    argv = ["train", "--task", "lm", *make(tmp_path), *MODEL_FLAGS]
    assert main([*argv, "--logdir", str(logdir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tfnorm train: error: ") and err.count("\n") == 1, err
    assert __import__("re").search(expected, err), err
    assert not logdir.exists()


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--task", "sorted", "--preset", "gpt2"], r"--preset .*--task lm only"),
        (["--data", "."], r"--data .*it is a directory; .*--task lm"),
    ],
    ids=["preset-without-lm", "directory-for-the-classifier"],
)
def test_language_model_settings_stay_with_the_language_model(capsys, argv, expected):
    assert main(["train", *argv, "--print-config"]) == 2
    err = capsys.readouterr().err
    assert __import__("re").search(expected, err) and err.count("\n") == 1, err


@pytest.mark.slow
def test_kill_9_of_a_language_model_run_resumes_to_the_same_weights(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(corpus_text(), encoding="utf-8")
    flags = ["--task", "lm", "--data", str(corpus), *MODEL_FLAGS]
    table = kill_9_trials(tmp_path, 2, model_flags=flags)
    assert table["survived"] == table["tried"] == 2
    assert table["data_lost"] == 0 and table["during_write"] >= 1


@pytest.mark.slow
def test_a_multi_worker_language_model_run_has_the_chief_write_everything(tmp_path):
    from tests.cli.test_train import (
        test_multi_worker_run_of_two_processes_has_the_chief_write_everything as run,
    )

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(corpus_text(), encoding="utf-8")
    run(tmp_path, ["--task", "lm", "--data", str(corpus), *MODEL_FLAGS])


def test_sigterm_saves_a_checkpoint_of_a_language_model_run_and_exits_143(tmp_path):
    from tests.cli.test_train import (
        LONG_RUN,
        LONG_RUN_FLAGS,
        latest_checkpoint_step,
        start,
        wait_for_checkpoint,
    )

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(corpus_text(), encoding="utf-8")
    logdir = tmp_path / "run"
    flags = ["--task", "lm", "--data", str(corpus), *MODEL_FLAGS]
    process = start(logdir, *LONG_RUN_FLAGS, model_flags=flags)
    try:
        wait_for_checkpoint(process, str(logdir / "checkpoints"))
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 143
    finally:
        if process.poll() is None:
            process.kill()
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["status"] == "terminated"
    stopped_at = summary["final_step"]
    assert latest_checkpoint_step(str(logdir / "checkpoints")) == stopped_at < LONG_RUN

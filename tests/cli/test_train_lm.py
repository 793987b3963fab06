"""`tfnorm train --task lm`: the command end to end, bad text and settings as
one line, and kill -9 of a language-model run resuming exactly."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest

from tests.cli.test_train import command, environment
from tests.cli.test_train_faults import event_steps, final_values, kill_9_trials
from tests.conftest import REPO
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
    ("a classifier setting", lambda t: bad_text(t, b"x" * 199) + ["--pooling", "cls"], r"--pooling .*applies to tfnorm's classifier only"),
    ("validation shorter than a context", lambda t: bad_text(t, b"x" * 99) + ["--val-split", "0.1"], r"bad\.txt: the validation share \(--val-split 0\.1\) is 10 tokens, shorter than one window of 17"),
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


# ------------------------------------------ steps, evaluation, throughput


def test_max_steps_evaluates_every_n_steps_keeps_the_best_and_reports_tokens(
    tmp_path, capsys
):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(corpus_text(6000), encoding="utf-8")
    logdir = tmp_path / "run"
    argv = ["train", "--task", "lm", "--data", str(corpus), *MODEL_FLAGS]
    argv += ["--max-steps", "5", "--eval-every", "2", "--eval-batches", "1"]
    argv += ["--keep-best", "--log-every", "5", "--no-export", "--logdir", str(logdir)]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "5 steps (max_steps; 43 an epoch)" in out
    assert "weight decay 0.01 on 9 of 12 variables (not on: gamma)" in out
    evaluated = re.findall(r"step (\d)/5 val_loss \S+ .*?(\(estimate\))?(;|\n)", out)
    # Step 0, every 2 steps from 1 batch, and the last step from all of it.
    assert [(s, e) for s, e, _ in evaluated] == [
        ("0", "(estimate)"), ("2", "(estimate)"), ("4", "(estimate)"), ("5", ""),
    ]  # fmt: skip
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["final_step"] == summary["total_steps"] == 5
    metrics = summary["metrics"]
    assert metrics["tokens_per_second"] == pytest.approx(
        metrics["examples_per_second"] * 16
    )
    assert re.search(r"step 5/5 epoch 1/1 .* examples/s \S+ tokens/s \d+ eta", out)
    best = summary["best_checkpoint"]
    assert best["checkpoint"] == str(
        logdir / "checkpoints" / "best" / f"ckpt-{best['step']}"
    )
    assert sorted(os.listdir(logdir / "checkpoints" / "best")) == [
        "checkpoint", f"ckpt-{best['step']}.data-00000-of-00001", f"ckpt-{best['step']}.index",
    ]  # fmt: skip
    losses = {
        int(s): float(v) for s, v in re.findall(r"step (\d)/5 val_loss (\S+)", out)
    }
    assert best["val_loss"] == pytest.approx(min(losses.values()), abs=1e-4)
    steps = [step for tag, step in event_steps(logdir / "validation") if tag == "loss"]
    assert steps == [0, 2, 4, 5]


def test_max_steps_with_epochs_ends_at_whichever_comes_first(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(corpus_text(3000), encoding="utf-8")
    argv = ["train", "--task", "lm", "--data", str(corpus), *MODEL_FLAGS, "--no-export"]
    argv += ["--steps-per-epoch", "2", "--epochs", "2", "--val-split", "0"]
    assert main([*argv, "--max-steps", "9", "--logdir", str(tmp_path / "a")]) == 0
    assert main([*argv, "--max-steps", "3", "--logdir", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "4 steps (2 epochs x 2)" in out and "3 steps (max_steps; 2 an epoch)" in out
    for name, steps in (("a", 4), ("b", 3)):
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        assert summary["final_step"] == summary["total_steps"] == steps


# kill -9 of the process in the middle of an evaluation: after its scalars
# are written, before it is recorded as done (the worst moment).
KILLED_IN_AN_EVALUATION = """
import os, signal, sys

argv, sys.argv = sys.argv[1:], ["tfnorm"]
from tfnorm.training.rundir import evaluations

write = evaluations.EvaluationRecord.write


def killing_write(self, step, metrics, best):
    if step == int(os.environ["KILL_AT_EVALUATION"]):
        os.kill(os.getpid(), signal.SIGKILL)
    return write(self, step, metrics, best)


evaluations.EvaluationRecord.write = killing_write
from tfnorm.cli.main import main

sys.exit(main(argv))
"""


def test_an_evaluation_killed_midway_is_redone_on_resume_and_the_run_ends_the_same(
    tmp_path, capsys
):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(corpus_text(4000), encoding="utf-8")
    flags = ["--task", "lm", "--data", str(corpus), *MODEL_FLAGS, "--no-export"]
    flags += ["--max-steps", "6", "--eval-every", "3", "--checkpoint-every", "3"]
    flags += ["--keep-best"]
    reference, logdir = tmp_path / "reference", tmp_path / "run"
    assert main(command(reference, *flags, model_flags=[])[3:]) == 0
    script = tmp_path / "killed.py"
    script.write_text(KILLED_IN_AN_EVALUATION)
    killed = subprocess.run(
        [sys.executable, str(script), *command(logdir, *flags, model_flags=[])[3:]],
        capture_output=True, text=True, cwd=REPO, timeout=600,
        env=dict(environment(), KILL_AT_EVALUATION="3"),
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert ("loss", 3) in event_steps(logdir / "validation")  # written, not recorded
    capsys.readouterr()
    assert main(command(logdir, *flags, model_flags=[])[3:]) == 0
    out = capsys.readouterr().out
    assert "resumed from step 3" in out and "evaluating step 3 again" in out
    validation = event_steps(logdir / "validation")
    assert validation == event_steps(reference / "validation")
    assert [step for tag, step in validation if tag == "loss"] == [0, 3, 6]
    _, expected = final_values(reference)
    _, actual = final_values(logdir)
    assert actual.keys() == expected.keys()
    assert all(np.array_equal(actual[k], expected[k]) for k in expected)
    summaries = [
        json.loads((d / "summary.json").read_text()) for d in (reference, logdir)
    ]
    assert (
        summaries[0]["best_checkpoint"]["step"]
        == summaries[1]["best_checkpoint"]["step"]
    )
    assert summaries[0]["metrics"]["val_loss"] == summaries[1]["metrics"]["val_loss"]


@pytest.mark.slow
def test_kill_9_at_random_times_with_evaluations_every_two_steps_resumes_exactly(
    tmp_path,
):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(corpus_text(), encoding="utf-8")
    flags = ["--task", "lm", "--data", str(corpus), *MODEL_FLAGS]
    flags += ["--eval-every", "2", "--eval-batches", "2", "--keep-best"]
    table = kill_9_trials(tmp_path, 4, model_flags=flags)
    assert table["survived"] == table["tried"] == 4 and table["data_lost"] == 0
    for trial in range(4):
        steps = event_steps(tmp_path / f"trial{trial}" / "validation")
        assert len(set(steps)) == len(steps)


# A tiny `tfnorm` console script: which modules were loaded when it ended.
TENSORFLOW_PROBE = """
import atexit, sys
atexit.register(lambda: print("tensorflow imported:", "tensorflow" in sys.modules))
from tfnorm.cli.main import main
sys.exit(main())
"""


@pytest.mark.parametrize(
    "content, extra, expected",
    [
        (b"", [], "the file is empty"),
        (b"ok\n\xc3\x28", [], "not UTF-8"),
        (b"tiny", [], "shorter than one window"),
        (b"x" * 99, ["--val-split", "0.1"], "the validation share"),
    ],
    ids=["empty", "not-utf8", "too-short", "validation-shorter-than-a-context"],
)
def test_bad_text_is_refused_before_tensorflow_loads(
    tmp_path, content, extra, expected
):
    (tmp_path / "bad.txt").write_bytes(content)
    script = tmp_path / "tfnorm"
    script.write_text(TENSORFLOW_PROBE)
    argv = ["train", "--task", "lm", "--data", str(tmp_path / "bad.txt"), *MODEL_FLAGS]
    result = subprocess.run(
        [sys.executable, str(script), *argv, *extra, "--logdir", str(tmp_path / "run")],
        capture_output=True, text=True, env=environment(), timeout=120,
    )  # fmt: skip
    assert result.returncode == 2 and expected in result.stderr, result.stderr
    assert "tensorflow imported: False" in result.stdout
    assert not (tmp_path / "run").exists()


def test_random_windows_resume_exactly_where_the_run_stopped(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(corpus_text(3000), encoding="utf-8")
    flags = ["--task", "lm", "--data", str(corpus), *MODEL_FLAGS, "--no-export"]
    flags += ["--windows", "random", "--decay", "constant", "--val-split", "0"]
    reference, logdir = tmp_path / "reference", tmp_path / "run"
    assert main(command(reference, *flags, "--max-steps", "4", model_flags=[])[3:]) == 0
    assert main(command(logdir, *flags, "--max-steps", "2", model_flags=[])[3:]) == 0
    assert main(command(logdir, *flags, "--max-steps", "4", model_flags=[])[3:]) == 0
    assert "resumed from step 2" in capsys.readouterr().out
    _, expected = final_values(reference)
    _, actual = final_values(logdir)
    assert all(np.array_equal(actual[k], expected[k]) for k in expected)


def test_the_presets_feed_forward_biases_and_initialisation_can_be_overridden(
    tmp_path, capsys
):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(corpus_text(3000), encoding="utf-8")
    logdir = tmp_path / "run"
    argv = ["train", "--task", "lm", "--data", str(corpus), *MODEL_FLAGS]
    argv += ["--preset", "gpt2", "--bias", "false", "--feed-forward", "relu"]
    argv += ["--init-std", "0.02", "--weight-decay-on", "all", "--val-split", "0"]
    argv += ["--max-steps", "1", "--no-export", "--logdir", str(logdir)]
    assert main(argv) == 0, capsys.readouterr().err
    recipe = json.loads((logdir / "language_model.json").read_text())["build_decoder"]
    assert recipe["use_bias"] is False and recipe["feed_forward"] == "relu"
    assert recipe["init_std"] == 0.02
    # No biases left: embeddings, 4 attention and 2 feed-forward kernels,
    # 3 norms' gamma and beta; all decayed.
    out = capsys.readouterr().out
    assert "weight decay 0.01 on 14 of 14 variables (all of them)" in out


def test_an_xla_compiled_step_trains_like_the_graph_step(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(corpus_text(3000), encoding="utf-8")
    argv = ["train", "--task", "lm", "--data", str(corpus), *MODEL_FLAGS]
    argv += ["--max-steps", "2", "--val-split", "0", "--no-export", "--dropout", "0"]
    for name, extra in (("graph", []), ("xla", ["--jit-compile"])):
        assert main([*argv, *extra, "--logdir", str(tmp_path / name)]) == 0
    capsys.readouterr()
    graph, xla = (
        json.loads((tmp_path / name / "summary.json").read_text())["metrics"]["loss"]
        for name in ("graph", "xla")
    )
    assert xla == pytest.approx(graph, rel=1e-3)

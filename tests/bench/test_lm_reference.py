"""`bench/lm_reference.py` (tfnorm train vs nanoGPT): its recipe reaches
`tfnorm train` as nanoGPT's, its evaluator reads tfnorm's evaluation
windows, and its refusals. The run itself needs a nanoGPT checkout
(`NANOGPT_DIR`) and the reference venv: without them that test skips (it
is marked slow)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from bench import lm_pair, lm_recipe, lm_reference, nanogpt_eval
from tests.conftest import REPO
from tfnorm.training.data.byte_text import TokenWindows
from tfnorm.training.workloads import language_model


def test_nanogpt_evaluator_reads_the_windows_of_tfnorms_evaluation():
    tokens = np.random.default_rng(0).integers(0, 257, 1000)
    seen = []

    def eval_step(inputs, targets):
        seen.append((inputs.numpy(), targets.numpy()))
        return 0.0, 0.0

    language_model.evaluate(eval_step, TokenWindows(tokens, 64), batch_size=5)
    pieces = nanogpt_eval.validation_windows(tokens, 64)
    ours = [np.concatenate([p[i].ravel() for p in seen]) for i in (0, 1)]
    theirs = [np.concatenate([p[i].ravel() for p in pieces]) for i in (0, 1)]
    np.testing.assert_array_equal(theirs[0], ours[0])
    np.testing.assert_array_equal(theirs[1], ours[1])
    # Every token but the first is predicted once; the tail is a window.
    assert len(theirs[1]) == len(tokens) - 1
    assert pieces[-1][0].shape == (1, (len(tokens) - 1) % 64)


def _tfnorm_config(tmp_path, preset, jit_compile, seed):
    """The settings `tfnorm train` takes from the bench's command line."""
    (tmp_path / "a.txt").write_text("some text " * 50)
    args = lm_reference.parse_args(["--max-steps", "2000"])
    command = lm_recipe.tfnorm_command(
        args, preset, jit_compile, seed, str(tmp_path / "run"), str(tmp_path)
    )
    shown = subprocess.run(
        command + ["--print-config"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": REPO},
    )
    return json.loads(shown.stdout)


def test_recipe_reaches_tfnorm_train_as_nanogpts_settings(tmp_path):
    config = _tfnorm_config(tmp_path, "gpt2", True, 3)
    expected = {
        "task": "lm",
        "num_layers": 4,
        "num_heads": 4,
        "d_model": 128,
        "dff": 512,
        "max_len": 64,
        "batch_size": 12,
        "max_steps": 2000,
        "learning_rate": 1e-3,
        "warmup_steps": 100,
        "decay": "cosine",
        "min_learning_rate": 1e-4,
        "beta1": 0.9,
        "beta2": 0.99,
        "weight_decay": 0.1,
        "weight_decay_on": "matrices",
        "clipnorm": 1.0,
        "dropout_rate": 0.0,
        "windows": "random",
        "val_split": 0.1,
        "preset": "gpt2",
        "bias": False,
        "init_std": 0.02,
        "feed_forward": "gelu",
        "epsilon": 1e-5,
        "jit_compile": True,
        "seed": 3,
        "eval_every": 2000,
        "histogram_every": 0,
        "export": False,
    }
    assert {key: config[key] for key in expected} == expected


def test_the_llama_preset_runs_at_nanogpts_size(tmp_path):
    config = _tfnorm_config(tmp_path, "llama", False, 0)
    assert config["preset"] == "llama" and config["dff"] == lm_recipe.LLAMA_DFF
    # SwiGLU's three matrices hold within 1% of the weights of nanoGPT's
    # two-matrix MLP of width 4 x n_embd.
    swiglu, mlp = 3 * 128 * config["dff"], 2 * 128 * 512
    assert abs(swiglu / mlp - 1) < 0.01


def test_nanogpt_gets_the_same_recipe():
    args = lm_reference.parse_args(["--nanogpt-dir", "n", "--max-steps", "300"])
    flags = lm_recipe.nanogpt_command(args, "/out")[2:]
    assert "--max_iters=300" in flags and "--lr_decay_iters=300" in flags
    assert "--warmup_iters=15" in flags  # 100 of 2000
    for flag in ("--beta2=0.99", "--min_lr=0.0001", "--bias=False", "--dropout=0.0"):
        assert flag in flags
    assert "--gradient_accumulation_steps=1" in flags and "--compile=False" in flags
    assert flags[-1] == "--out_dir=/out"


def test_a_directory_without_nanogpt_says_how_to_get_it(tmp_path):
    problem = lm_recipe.nanogpt_problem(str(tmp_path))
    assert lm_recipe.HOW_TO_GET in problem and f"nanogpt_dir={tmp_path}" in problem


@pytest.mark.skipif(shutil.which("git") is None, reason="no git here")
def test_another_nanogpt_commit_is_refused(tmp_path):
    (tmp_path / "train.py").write_text("")
    run = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(run[:3] + ["init", "-q"], check=True)
    subprocess.run(run + ["add", "train.py"], check=True)
    subprocess.run(run + ["commit", "-qm", "x"], check=True)
    problem = lm_recipe.nanogpt_problem(str(tmp_path))
    assert f"not the pinned {lm_recipe.NANOGPT_COMMIT}" in problem
    assert f"nanogpt_dir={tmp_path}" in problem


def test_missing_nanogpt_dir_is_one_line_and_status_2(capsys):
    with pytest.raises(SystemExit) as stopped:
        lm_reference.main([])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--nanogpt-dir is required" in err
    assert lm_recipe.NANOGPT_COMMIT in err


def test_a_workdir_of_other_files_is_not_emptied(tmp_path):
    assert lm_reference.workdir_problem(str(tmp_path)) is None  # empty
    (tmp_path / "notes.txt").write_text("mine")
    problem = lm_reference.workdir_problem(str(tmp_path))
    assert "holds files of something else" in problem
    (tmp_path / lm_reference.MARKER).write_text("")
    assert lm_reference.workdir_problem(str(tmp_path)) is None


def test_step_time_is_the_median_over_windows_after_the_skipped_steps():
    # 10 ms a step, but the first 20 steps slow and one window of 10 at 50 ms.
    times, now = [], 0.0
    for step in range(1, 101):
        now += 1.0 if step <= 20 else 0.05 if 61 <= step <= 70 else 0.01
        times.append((step, now))
    assert lm_pair.window_ms(times, 20, 100) == pytest.approx(10.0)
    with pytest.raises(SystemExit, match="fewer than two progress lines"):
        lm_pair.window_ms(times, 100, 100)


# Two trainers for 30 steps (1-3 minutes): `make test-slow`.
@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("NANOGPT_DIR")
    or not os.path.exists(os.path.join(REPO, ".venv-hf", "bin", "python")),
    reason="needs NANOGPT_DIR (a nanoGPT checkout) and .venv-hf (make hf-reference)",
)
def test_a_short_pair_of_runs_gives_both_losses_and_step_times(tmp_path):
    table, raw = tmp_path / "l.md", tmp_path / "l.json"
    results = lm_reference.main(
        ["--nanogpt-dir", os.environ["NANOGPT_DIR"], "--max-steps", "30"]
        + ["--repeats", "1", "--presets", "gpt2", "--jit-compile", "off"]
        + ["--workdir", str(tmp_path / "w"), "--markdown", str(table)]
        + ["--json", str(raw)]
    )
    (result,) = results
    for side in ("tfnorm", "nanogpt"):
        assert 1.0 < result[side]["val_loss"] < 6.0  # below uniform: ln 257 = 5.55
        assert result[side]["ms_per_step"] > 0
    assert (
        result["nanogpt"]["tokens"]
        == json.loads(raw.read_text())["data"]["val_tokens"] - 1
    )
    assert "| 1 | gpt2 | graph |" in table.read_text()

"""Tests for `tfnorm compare` and the `make demo` target that runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tfnorm.cli import compare as compare_cli
from tfnorm.cli.main import build_parser, main
from tfnorm.experiments import warmup

TINY_FLAGS = [
    "--num-layers", "1",
    "--d-model", "8",
    "--num-heads", "2",
    "--dff", "16",
    "--vocab-size", "5",
    "--seq-len", "4",
    "--batch-size", "4",
    "--steps", "3",
    "--warmup-steps", "2",
    "--eval-size", "8",
    "--eval-every", "3",
    "--seeds", "1",
    "--no-jit",
]  # fmt: skip


def test_help_shows_the_library_defaults():
    subcommands = next(
        a for a in build_parser()._actions if a.dest == "command"
    ).choices
    text = " ".join(subcommands["compare"].format_help().split())
    assert f"(default: {warmup.DEFAULTS['steps']})" in text
    assert f"(default: {warmup.DEFAULTS['learning_rate']})" in text
    seeds = " ".join(str(s) for s in warmup.DEFAULTS["seeds"])
    assert f"(default: {seeds})" in text


def test_unset_flags_leave_the_library_defaults_in_force():
    args = build_parser().parse_args(["compare"])
    assert compare_cli._options(args) == {}
    args = build_parser().parse_args(
        ["compare", "--steps", "7", "--seeds", "4", "5", "--no-jit"]
    )
    assert compare_cli._options(args) == {
        "steps": 7,
        "seeds": [4, 5],
        "jit_compile": False,
    }


def test_compare_writes_the_results_and_prints_where_they_are(tmp_path, capsys):
    output_dir = str(tmp_path / "out")
    assert main(["compare", "--output-dir", output_dir] + TINY_FLAGS) == 0
    printed = capsys.readouterr().out
    assert f"table:       {os.path.join(output_dir, 'results.md')}" in printed
    assert f"plot:        {os.path.join(output_dir, 'comparison.png')}" in printed
    assert f"tensorboard --logdir {os.path.join(output_dir, 'tensorboard')}" in printed
    assert "| pre-LN, no warm-up | " in printed
    with open(os.path.join(output_dir, "results.json")) as f:
        config = json.load(f)["config"]
    assert (
        config["steps"] == 3
        and config["seeds"] == [1]
        and config["jit_compile"] is False
    )
    assert config["learning_rate"] == warmup.DEFAULTS["learning_rate"]


# `make demo` as the README gives it, at a tiny size (CI also runs it at its
# default size). Slow: a whole `make` and a fresh interpreter.
@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("make") is None
    or not os.path.exists(os.path.join(REPO, ".venv", "bin", "python")),
    reason="`make demo` runs the repository's .venv, which does not run here",
)
def test_make_demo_runs_compare_and_prints_the_paths(tmp_path):
    output_dir = str(tmp_path / "demo")
    env = dict(os.environ)
    result = subprocess.run(
        # -o: treat the venv as up to date, so the test never reinstalls it.
        [
            "make", "-s", "-o", ".venv/.installed", "demo",
            f"DEMO_DIR={output_dir}", "COMPARE_ARGS=" + " ".join(TINY_FLAGS),
        ],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"plot:        {output_dir}/comparison.png" in result.stdout
    assert f"tensorboard --logdir {output_dir}/tensorboard" in result.stdout
    assert os.path.exists(os.path.join(output_dir, "comparison.png"))


def test_printed_tensorboard_line_runs_in_a_shell_without_the_venv(
    tmp_path, monkeypatch
):
    # `make demo` runs .venv/bin/tfnorm from the clone's root in a shell where
    # the venv is not active: the line it prints must work as printed there.
    from tfnorm.cli.compare import tensorboard_command

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    command = tensorboard_command()
    assert command != "tensorboard"
    result = subprocess.run(
        f"{command} --version_tb",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    # With the venv active (its bin on PATH), the plain name is printed.
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + ":/usr/bin:/bin")
    assert tensorboard_command() == "tensorboard"

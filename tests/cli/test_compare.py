"""Tests for `tfnorm compare` and the `make demo` target that runs it."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tfnorm.choices import NORMS
from tfnorm.cli import compare as compare_cli
from tfnorm.cli import flags
from tfnorm.cli.main import build_parser, main
from tfnorm.experiments import compare_experiment as warmup
from tfnorm.experiments.compare_settings import CompareConfig
from tfnorm.settings.config_error import ConfigError

TINY_FLAGS = [
    "--num-layers", "1",
    "--d-model", "8",
    "--num-heads", "2",
    "--dff", "16",
    "--vocab-size", "5",
    "--seq-len", "4",
    "--batch-size", "4",
    "--steps", "10",
    "--warmup-steps", "3",
    "--eval-size", "8",
    "--eval-every", "5",
    "--histogram-every", "0",
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


@pytest.mark.parametrize("command", ["compare", "train"])
def test_help_names_every_norm_of_the_family(command):
    subcommands = next(
        a for a in build_parser()._actions if a.dest == "command"
    ).choices
    text = " ".join(subcommands[command].format_help().split())
    for name, choice in NORMS.items():
        assert f"{name} ({choice.summary})" in text


def test_epsilon_defaults_per_norm_and_a_norm_without_a_statistic_refuses_one():
    assert CompareConfig().resolve().epsilon == 1e-5
    assert CompareConfig(norm="RMSNorm".lower()).resolve().epsilon == 1e-5
    config = CompareConfig(norm="DynamicTanh").resolve()
    assert (config.norm, config.epsilon) == ("dyt", None)
    with pytest.raises(ConfigError, match="'dyt' divides by no statistic"):
        CompareConfig(norm="dyt", epsilon=1e-5).resolve()
    with pytest.raises(ConfigError, match="must be a norm name"):
        CompareConfig(norm="group").resolve()


def test_unset_flags_leave_the_library_defaults_in_force():
    args = build_parser().parse_args(["compare"])
    assert compare_cli._options(args) == {}
    args = build_parser().parse_args(
        ["compare", "--steps", "7", "--seeds", "4", "5", "--no-jit"]
    )
    # Raw values: the settings' own readers check and convert them.
    assert compare_cli._options(args) == {
        "steps": "7",
        "seeds": ["4", "5"],
        "jit_compile": False,
    }
    config = CompareConfig.from_dict(compare_cli._options(args)).resolve()
    assert (config.steps, config.seeds, config.jit_compile) == (7, (4, 5), False)
    args = build_parser().parse_args(["compare", "--depths", "6", "12", "18"])
    config = CompareConfig.from_dict(compare_cli._options(args)).resolve()
    assert config.depths == (6, 12, 18) and config.warmup_steps == 60


def test_every_setting_has_a_flag_and_help_names_the_texts_source():
    subcommands = next(
        a for a in build_parser()._actions if a.dest == "command"
    ).choices
    text = " ".join(subcommands["compare"].format_help().split())
    for field in dataclasses.fields(CompareConfig):
        assert flags.flags_of(field)[0] in text
    assert "pydoc_data.topics" in text
    assert "--task {reverse,mlm,lm}" in text


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--steps", "0", "--steps: `steps` must be an integer in [1, "),
        ("--steps", "2.7", "Received: steps='2.7'"),
        ("--steps", "true", "Received: steps='true'"),
        ("--seeds", "x", "--seeds: `seeds` must be an integer"),
        ("--task", "poetry", "--task: `task` must be one of 'reverse', 'mlm'"),
        ("--warmup-steps", "100", "--warmup-steps: `warmup_steps` must be at most 30%"),
        ("--learning-rate", "-1", "--learning-rate: `learning_rate`"),
        (
            "--learning-rate",
            "1e300",
            "`learning_rate` must be a finite number in (0, 3.40282e+38]",
        ),
        (
            "--epsilon",
            "1e300",
            "--epsilon: `epsilon` must be a number in about [1.18e-38, 3.4e+38]",
        ),
        ("--depths", "0", "--depths: `depths` must be an integer in [1, 64]"),
        ("--variants", "middle", "--variants: `variants` must name variants"),
        ("--variants", "post:300", "--variants: A variant's warm-up must be shorter"),
    ],
)
def test_bad_values_are_one_line_errors_with_exit_status_2(
    tmp_path, capsys, flag, value, message
):
    output_dir = str(tmp_path / "out")
    assert main(["compare", "--output-dir", output_dir, flag, value]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("tfnorm compare: error: ")
    assert message in captured.err
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert not os.path.exists(output_dir)


def test_an_output_dir_that_cannot_be_created_is_a_one_line_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["compare", "--output-dir", str(blocker / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tfnorm compare: error: --output-dir: `output_dir`")
    assert err.count("\n") == 1


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
        config["steps"] == 10
        and config["seeds"] == [1]
        and config["jit_compile"] is False
    )
    assert config["learning_rate"] == warmup.DEFAULTS["learning_rate"]


def test_variants_flag_trains_only_the_variants_it_names(tmp_path, capsys):
    output_dir = str(tmp_path / "out")
    flags_given = TINY_FLAGS + ["--variants", "pre", "post:2"]
    assert main(["compare", "--output-dir", output_dir] + flags_given) == 0
    with open(os.path.join(output_dir, "results.json")) as f:
        table = json.load(f)["table"]
    assert [row["variant"] for row in table] == [
        "pre-LN, no warm-up",
        "post-LN, warm-up 2",
    ]


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


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--task", "lm", "--vocab-size", "10"],
            "--vocab-size: task 'lm' reads bytes",
        ),
        (
            ["--norms", "rms", "dyt"],
            "--norms: `norms` compares norms in the decoder experiment (task "
            "'lm') only. Received: norms=['rms', 'dyt'] with task='reverse'",
        ),
        (["--task", "lm", "--norms", "batch"], "--norms: `norms` must be a norm"),
        (
            ["--task", "lm", "--text-unit", "word"],
            "--text-unit: `text_unit` chooses the units of task 'mlm' only (lm "
            "reads bytes, reverse makes symbols). Received: text_unit='word' "
            "with task='lm'",
        ),
        (["--text-unit", "char"], "Received: text_unit='char' with task='reverse'"),
    ],
)
def test_settings_that_do_not_apply_to_the_task_are_one_line_errors(
    tmp_path, capsys, argv, message
):
    output_dir = str(tmp_path / "out")
    assert main(["compare", "--output-dir", output_dir] + argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tfnorm compare: error: ")
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not os.path.exists(output_dir)


LM_TINY_FLAGS = [
    "--task", "lm",
    "--num-layers", "1",
    "--d-model", "8",
    "--num-heads", "2",
    "--dff", "16",
    "--seq-len", "8",
    "--batch-size", "4",
    "--steps", "4",
    "--warmup-steps", "1",
    "--eval-size", "4",
    "--eval-every", "2",
    "--histogram-every", "0",
    "--seeds", "1",
    "--norms", "layer",
    "--no-jit",
]  # fmt: skip


def test_compare_task_lm_prints_the_bits_per_byte_table(tmp_path, capsys):
    output_dir = str(tmp_path / "out")
    assert main(["compare", "--output-dir", output_dir] + LM_TINY_FLAGS) == 0
    printed = capsys.readouterr().out
    assert "Unigram model of the training bytes" in printed
    assert "| pre-LN, warm-up 1 | layer |" in printed
    assert f"plot:        {os.path.join(output_dir, 'comparison.png')}" in printed
    with open(os.path.join(output_dir, "results.json")) as f:
        saved = json.load(f)
    assert saved["config"]["task"] == "lm" and saved["config"]["norms"] == ["layer"]


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("make") is None
    or not os.path.exists(os.path.join(REPO, ".venv", "bin", "python")),
    reason="`make demo-lm` runs the repository's .venv, which does not run here",
)
def test_make_demo_lm_runs_the_decoder_experiment(tmp_path):
    output_dir = str(tmp_path / "demo-lm")
    flags = [flag for flag in LM_TINY_FLAGS if flag not in ("--task", "lm")]
    result = subprocess.run(
        [
            "make", "-s", "-o", ".venv/.installed", "demo-lm",
            f"DEMO_LM_DIR={output_dir}", "COMPARE_ARGS=" + " ".join(flags),
        ],
        cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Unigram model of the training bytes" in result.stdout
    assert f"plot:        {output_dir}/comparison.png" in result.stdout
    with open(os.path.join(output_dir, "results.json")) as f:
        assert json.load(f)["task"]["name"] == "lm"

"""`tfnorm train`: flags, config files, exit statuses, kill -9 / SIGTERM recovery.

The recovery tests run the real command in a subprocess, as `nohup tfnorm
train ...` would run over SSH, and signal it once a checkpoint exists.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from tfnorm.cli.flags import flag_name
from tfnorm.cli.main import build_parser, main
from tfnorm.settings.setting import setting_of
from tfnorm.training.config.train_config import TrainConfig

ISSUE_FLAGS = (
    "--config",
    "--task",
    "--data",
    "--val-data",
    "--num-layers",
    "--d-model",
    "--num-heads",
    "--dff",
    "--max-len",
    "--norm",
    "--norm-position",
    "--optimizer",
    "--learning-rate",
    "--warmup-steps",
    "--weight-decay",
    "--clipnorm",
    "--epochs",
    "--steps-per-epoch",
    "--batch-size",
    "--strategy",
    "--mixed-precision",
    "--logdir",
    "--checkpoint-dir",
    "--checkpoint-every",
    "--seed",
    "--log-file",
)

TINY_FLAGS = [
    "--task",
    "sorted",
    "--num-examples",
    "128",
    "--max-len",
    "8",
    "--num-layers",
    "1",
    "--d-model",
    "16",
    "--num-heads",
    "2",
    "--dff",
    "32",
    "--batch-size",
    "16",
    "--histogram-every",
    "0",
]


def train_help():
    parser = build_parser()
    subparsers = next(action for action in parser._actions if action.dest == "command")
    return subparsers.choices["train"].format_help()


def test_help_documents_every_flag_and_the_exit_statuses():
    text = train_help()
    for flag in ISSUE_FLAGS:
        assert re.search(rf"^\s+{flag}\b", text, re.MULTILINE), flag
    assert "143" in text and "130" in text and "NaN" in text


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--learning-rate", "-1"),
        ("--learning-rate", "fast"),
        ("--batch-size", "0"),
        ("--epochs", "1.5"),
        ("--warmup-steps", "-3"),
        ("--norm-position", "middle"),
        ("--mixed-precision", "float8"),
        ("--strategy", "tpu"),
        ("--task", "reverse"),
        ("--clipnorm", "-2"),
    ],
)
def test_bad_flag_values_name_the_flag_and_value(capsys, flag, value):
    assert main(["train", "--task", "sorted", flag, value]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"tfnorm train: error: {flag} (config key ")
    assert value in error and error.count("\n") == 1


def test_usage_errors_are_one_line_too(capsys):
    with pytest.raises(SystemExit) as info:
        main(["train", "--no-such-flag"])
    assert info.value.code == 2
    error = capsys.readouterr().err
    assert "unrecognized arguments: --no-such-flag" in error
    assert error.count("\n") == 1


def test_a_flag_and_a_config_value_are_read_the_same_way(tmp_path, capsys):
    # YAML 1.1 reads 1e-3 as a string; the flag's string takes the same path.
    path = tmp_path / "run.yaml"
    path.write_text("task: sorted\nlearning_rate: 1e-3\nclipnorm: off\n")
    from_file = print_config(["--config", str(path)], capsys)
    from_flags = print_config(
        ["--task", "sorted", "--learning-rate", "1e-3", "--clipnorm", "off"], capsys
    )
    assert from_file == from_flags
    assert from_file["learning_rate"] == 0.001 and from_file["clipnorm"] is None


def test_help_is_generated_from_the_config_declarations():
    text = train_help()
    for field in dataclasses.fields(TrainConfig):
        setting = setting_of(field)
        flag = setting.flags[0] if setting.flags else flag_name(field.name)
        assert re.search(rf"^\s+{flag}\b", text, re.MULTILINE), flag
    assert "{sorted,duplicate,majority,lm}" in text
    assert "--dropout-rate DROPOUT_RATE, --dropout DROPOUT_RATE" in text


HELP_PROBE = """
import atexit, sys
atexit.register(lambda: print("tensorflow imported:", "tensorflow" in sys.modules))
from tfnorm.cli.main import main
sys.exit(main())
"""


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["compare", "-h"]])
def test_help_answers_without_importing_tensorflow(tmp_path, argv):
    # The console script is a file named `tfnorm` that imports tfnorm.cli.main.
    script = tmp_path / "tfnorm"
    script.write_text(HELP_PROBE)
    result = subprocess.run(
        [sys.executable, str(script), *argv],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "usage: tfnorm" in result.stdout
    assert "tensorflow imported: False" in result.stdout


def print_config(argv, capsys):
    assert main(["train", *argv, "--print-config"]) == 0
    return json.loads(capsys.readouterr().out)


def test_config_file_is_read_and_flags_win(tmp_path, capsys):
    yaml_file = tmp_path / "run.yaml"
    yaml_file.write_text(
        "task: majority\nd_model: 32\nnum_heads: 4\nlearning_rate: 0.01\n"
        "clipnorm: null\nnorm-position: post\n"
    )
    merged = print_config(["--config", str(yaml_file), "--d-model", "16"], capsys)
    assert merged["task"] == "majority" and merged["d_model"] == 16
    assert merged["learning_rate"] == 0.01 and merged["clipnorm"] is None
    assert merged["norm_position"] == "post"
    json_file = tmp_path / "run.json"
    json_file.write_text(json.dumps({"task": "sorted", "epochs": 3}))
    merged = print_config(["--config", str(json_file), "--epochs", "5"], capsys)
    assert merged["epochs"] == 5 and merged["task"] == "sorted"
    assert merged["export"] is True
    assert print_config(["--task", "sorted", "--no-export"], capsys)["export"] is False


@pytest.mark.parametrize(
    "content, expected",
    [
        ("task: sorted\nd_model: 16\nnum_heads: 3\n", "--d-model (config key d_model)"),
        (
            "task: sorted\nlearning_rate: -1\n",
            "--learning-rate (config key learning_rate)",
        ),
        (
            "task: sorted\nlearnig_rate: 0.1\n",
            "Unknown training setting 'learnig_rate'",
        ),
        ("- just\n- a list\n", "must hold a mapping"),
        ("task: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_config_file_values_are_named(tmp_path, capsys, content, expected):
    path = tmp_path / "run.yaml"
    path.write_text(content)
    assert main(["train", "--config", str(path), "--print-config"]) == 2
    assert expected in capsys.readouterr().err


def test_task_or_data_is_required(capsys):
    assert main(["train", "--print-config"]) == 2
    assert "--task (config key task)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "content, expected",
    [
        ("text,target\nhello,1\n", r"bad\.csv, line 1: the header has no `label`"),
        ("text,label\nok,0\nbad,one\n", r"bad\.csv, line 3: the label"),
        (
            "text,label\nok,0\nok,1\ntoo,many,1\n",
            r"bad\.csv, line 4: expected 2 fields",
        ),
        ("text,label\n", r"bad\.csv: the file holds no examples"),
    ],
)
def test_malformed_csv_fails_fast_with_file_and_line(
    tmp_path, capsys, content, expected
):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    logdir = tmp_path / "run"
    assert main(["train", "--data", str(path), "--logdir", str(logdir)]) == 2
    assert re.search(expected, capsys.readouterr().err)
    assert not (logdir / "summary.json").exists()


def test_the_command_resolves_the_config_once(tmp_path, config_checks, capsys):
    logdir = tmp_path / "run"
    argv = ["train", *TINY_FLAGS, "--steps-per-epoch", "2", "--no-export"]
    assert main([*argv, "--logdir", str(logdir)]) == 0, capsys.readouterr().err
    assert json.loads((logdir / "summary.json").read_text())["final_step"] == 2
    assert len(config_checks) == 1


def test_a_norm_of_the_family_without_a_statistic_trains_and_refuses_an_epsilon(
    tmp_path, capsys
):
    logdir = tmp_path / "dyt"
    argv = ["train", *TINY_FLAGS, "--steps-per-epoch", "2", "--norm", "dyt"]
    assert main([*argv, "--logdir", str(logdir)]) == 0, capsys.readouterr().err
    assert json.loads((logdir / "summary.json").read_text())["final_step"] == 2
    capsys.readouterr()
    refused = tmp_path / "refused"
    assert main([*argv, "--epsilon", "1e-5", "--logdir", str(refused)]) == 2
    assert "takes no `epsilon`" in capsys.readouterr().err


def test_a_malformed_tf_config_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["h:1"]}}')
    logdir = tmp_path / "run"
    assert main(["train", *TINY_FLAGS, "--logdir", str(logdir)]) == 2
    assert "error: TF_CONFIG needs a 'task' object" in capsys.readouterr().err
    assert not logdir.exists()


# ------------------------------------------------------- subprocess runs


def command(logdir, *extra, model_flags=None):
    return [
        sys.executable,
        "-m",
        "tfnorm",
        "train",
        *(TINY_FLAGS if model_flags is None else model_flags),
        "--logdir",
        str(logdir),
        "--log-file",
        str(logdir / "train.log"),
        *extra,
    ]


def run_to_end(logdir, *extra, model_flags=None):
    """Runs `tfnorm train` (tiny) in a subprocess until it exits."""
    return subprocess.run(
        command(logdir, *extra, model_flags=model_flags),
        capture_output=True,
        text=True,
        env=environment(),
        cwd=REPO,
        timeout=600,
    )


def environment():
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start(logdir, *extra, model_flags=None):
    logdir.mkdir(parents=True, exist_ok=True)
    stdout = open(logdir / "stdout.txt", "w")
    process = subprocess.Popen(
        command(logdir, *extra, model_flags=model_flags),
        stdout=stdout,
        stderr=subprocess.STDOUT,
        env=environment(),
        cwd=REPO,
    )
    stdout.close()
    return process


def latest_checkpoint_step(checkpoint_dir):
    state = os.path.join(checkpoint_dir, "checkpoint")
    if not os.path.exists(state):
        return None
    with open(state) as handle:
        match = re.search(
            r'^model_checkpoint_path: ".*ckpt-(\d+)"', handle.read(), re.M
        )
    return int(match.group(1)) if match else None


#: Steps of a run that a test ends with a signal: long enough that the run
#: cannot end on its own first, even when the test is starved on a busy machine.
LONG_RUN = 100_000
LONG_RUN_FLAGS = (
    "--epochs", "1", "--steps-per-epoch", str(LONG_RUN), "--checkpoint-every", "10",
)  # fmt: skip


def wait_for_checkpoint(process, checkpoint_dir, timeout=240):
    deadline = time.time() + timeout
    while time.time() < deadline:
        step = latest_checkpoint_step(checkpoint_dir)
        if step is not None:
            return step
        if process.poll() is not None:
            raise AssertionError(f"training exited early ({process.returncode})")
        time.sleep(0.02)
    process.kill()
    raise AssertionError("no checkpoint appeared in time")


def read(path):
    with open(path) as handle:
        return handle.read()


# Slow (two processes, 60 steps); tests/training covers resuming in-process.
@pytest.mark.slow
def test_kill_9_then_the_same_command_resumes_and_finishes_the_steps(tmp_path):
    logdir = tmp_path / "run"
    extra = ("--epochs", "2", "--steps-per-epoch", "30", "--checkpoint-every", "5")
    extra += ("--log-every", "5")
    process = start(logdir, *extra)
    try:
        wait_for_checkpoint(process, str(logdir / "checkpoints"))
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
    killed_at = latest_checkpoint_step(str(logdir / "checkpoints"))
    assert 5 <= killed_at < 60 and killed_at % 5 == 0
    assert not (logdir / "summary.json").exists()

    rerun = run_to_end(logdir, *extra)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr[-3000:]
    assert f"resumed from step {killed_at}" in rerun.stdout
    steps_after = [int(s) for s in re.findall(r"step (\d+)/60 ", rerun.stdout)]
    assert steps_after[0] == (killed_at // 5 + 1) * 5 and steps_after[-1] == 60
    summary = json.loads(read(logdir / "summary.json"))
    assert summary["status"] == "completed"
    assert summary["final_step"] == summary["total_steps"] == 60
    assert summary["resumed_from_step"] == killed_at
    # The log file keeps both runs' lines, line by line.
    log = read(logdir / "train.log")
    assert "starting from step 0" in log and f"resumed from step {killed_at}" in log


def test_sigterm_saves_a_checkpoint_and_exits_143(tmp_path):
    logdir = tmp_path / "run"
    extra = LONG_RUN_FLAGS
    process = start(logdir, *extra)
    try:
        wait_for_checkpoint(process, str(logdir / "checkpoints"))
        sent = time.time()
        process.send_signal(signal.SIGTERM)
        returncode = process.wait(timeout=60)
        elapsed = time.time() - sent
    finally:
        if process.poll() is None:
            process.kill()
    output = read(logdir / "stdout.txt")
    assert returncode == 143, output[-3000:]
    # "Within a few seconds": one step plus a checkpoint; generous for a busy
    # machine shared by other jobs.
    assert elapsed < 20
    match = re.search(r"SIGTERM received: checkpoint saved at step (\d+)", output)
    assert match, output[-3000:]
    stopped_at = int(match.group(1))
    assert latest_checkpoint_step(str(logdir / "checkpoints")) == stopped_at
    summary = json.loads(read(logdir / "summary.json"))
    assert summary["status"] == "terminated" and summary["exit_status"] == 143
    assert summary["final_step"] == stopped_at < LONG_RUN
    assert summary["model_path"] is None


def test_sighup_saves_a_checkpoint_and_the_summary_and_exits_129(tmp_path):
    # A terminal closed without nohup: SIGHUP, and stdout is gone too.
    logdir = tmp_path / "run"
    logdir.mkdir()
    extra = LONG_RUN_FLAGS
    with open(logdir / "stderr.txt", "w") as stderr:
        process = subprocess.Popen(
            command(logdir, *extra),
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=environment(),
            cwd=REPO,
            # A terminal's run: the suite itself may run under nohup.
            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
        )
    try:
        wait_for_checkpoint(process, str(logdir / "checkpoints"))
        process.stdout.close()
        process.send_signal(signal.SIGHUP)
        returncode = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    errors = read(logdir / "stderr.txt")
    assert returncode == 129, errors[-3000:]
    assert "Traceback" not in errors and "Exception ignored" not in errors
    summary = json.loads(read(logdir / "summary.json"))
    assert summary["status"] == "hangup" and summary["exit_status"] == 129
    stopped_at = summary["final_step"]
    assert latest_checkpoint_step(str(logdir / "checkpoints")) == stopped_at < LONG_RUN
    log = read(logdir / "train.log")
    assert f"SIGHUP received: checkpoint saved at step {stopped_at}" in log


def test_under_nohup_sighup_is_ignored_and_the_run_finishes(tmp_path):
    logdir = tmp_path / "run"
    logdir.mkdir()
    extra = ("--epochs", "1", "--steps-per-epoch", "30", "--checkpoint-every", "10")
    process = subprocess.Popen(
        command(logdir, *extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=environment(),
        cwd=REPO,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
    )
    try:
        wait_for_checkpoint(process, str(logdir / "checkpoints"))
        process.send_signal(signal.SIGHUP)
        assert process.wait(timeout=300) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert json.loads(read(logdir / "summary.json"))["status"] == "completed"


@pytest.mark.parametrize("redirect", ["", "2>&1"], ids=["stdout", "stdout+stderr"])
def test_piped_into_head_the_run_goes_on_to_its_end(tmp_path, redirect):
    # `tfnorm train ... | head -2`: head exits after two lines; the run must
    # not die of the broken pipe, and must finish with its summary.
    logdir = tmp_path / "run"
    extra = ("--epochs", "1", "--steps-per-epoch", "40", "--checkpoint-every", "10")
    extra += ("--log-every", "1")
    train = " ".join(shlex.quote(part) for part in command(logdir, *extra))
    script = (
        f"{train} {redirect} | head -2 > {shlex.quote(str(tmp_path / 'head.txt'))}; "
        'echo "${PIPESTATUS[0]}" > ' + shlex.quote(str(tmp_path / "status.txt"))
    )
    stderr = subprocess.run(
        ["bash", "-c", script],
        env=environment(),
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
        timeout=600,
    ).stderr
    assert read(tmp_path / "status.txt").strip() == "0", stderr[-3000:]
    assert len(read(tmp_path / "head.txt").splitlines()) == 2
    assert "Traceback" not in stderr and "Exception ignored" not in stderr
    summary = json.loads(read(logdir / "summary.json"))
    assert summary["status"] == "completed" and summary["final_step"] == 40
    assert latest_checkpoint_step(str(logdir / "checkpoints")) == 40
    log = read(logdir / "train.log")
    assert "step 40/40" in log and "log file only" in log


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


USER_MODULE = os.path.join(REPO, "tests", "training", "user_module.py")
USER_MODEL_FLAGS = [
    "--model-fn", f"{USER_MODULE}:compiled_model",
    "--data-fn", f"{USER_MODULE}:array_data", "--batch-size", "16",
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    "model_flags", [None, USER_MODEL_FLAGS], ids=["classifier", "users-model"]
)
def test_multi_worker_run_of_two_processes_has_the_chief_write_everything(
    tmp_path, model_flags
):
    logdir = tmp_path / "run"
    logdir.mkdir()
    cluster = {"worker": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]}
    extra = ("--epochs", "1", "--steps-per-epoch", "4", "--checkpoint-every", "2")
    extra += ("--strategy", "multi_worker", "--log-every", "1")
    processes, outputs = [], []
    try:
        for index in range(2):
            env = environment()
            env["TF_CONFIG"] = json.dumps(
                {"cluster": cluster, "task": {"type": "worker", "index": index}}
            )
            outputs.append(tmp_path / f"worker{index}.txt")
            with open(outputs[-1], "w") as stdout:
                cmd = command(logdir, *extra, model_flags=model_flags)
                cmd.remove("--log-file")
                cmd.remove(str(logdir / "train.log"))
                processes.append(
                    subprocess.Popen(
                        cmd, stdout=stdout, stderr=subprocess.STDOUT, env=env, cwd=REPO
                    )
                )
        codes = [process.wait(timeout=900) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    assert codes == [0, 0], read(outputs[0])[-2000:] + read(outputs[1])[-2000:]
    assert "2 replica(s)" in read(outputs[0])
    summary = json.loads(read(logdir / "summary.json"))
    assert summary["status"] == "completed" and summary["final_step"] == 4
    assert latest_checkpoint_step(str(logdir / "checkpoints")) == 4
    # The non-chief's scratch copies are gone.
    assert not [n for n in os.listdir(logdir / "checkpoints") if n.startswith(".")]

"""`tfnorm train` under faults: full disk, read-only disk, concurrent runs, kill -9.

The faults a long run meets on a shared machine. Each trial is tiny; the ones that start many
processes are marked slow. Mounting a tmpfs needs root (the test image runs
as root); elsewhere those tests skip, saying why.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import random
import re
import subprocess
import time

import numpy as np
import pytest

from tests.cli.test_train import (
    REPO,
    command,
    environment,
    latest_checkpoint_step,
    read,
    run_to_end,
    start,
    wait_for_checkpoint,
)
from tfnorm._keras import tf
from tfnorm.cli.main import main
from tfnorm.training.rundir import checkpoints
from tfnorm.training.rundir.lock import DirectoryLock


@contextlib.contextmanager
def tmpfs(path, options):
    os.makedirs(path, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


WIDE = [  # ~0.6 MB per checkpoint: a 2 MB disk is full after three
    "--task", "sorted", "--num-examples", "128", "--max-len", "8",
    "--num-layers", "1", "--d-model", "64", "--num-heads", "2", "--dff", "256",
    "--batch-size", "16", "--histogram-every", "0", "--no-export",
]  # fmt: skip


def test_a_full_disk_ends_the_run_with_a_summary_and_no_partial_files(tmp_path, capsys):
    with tmpfs(tmp_path / "disk", "size=2m") as disk:
        logdir = disk / "run"
        argv = ["train", *WIDE, "--logdir", str(logdir), "--epochs", "1"]
        argv += ["--steps-per-epoch", "8", "--checkpoint-every", "1"]
        argv += ["--keep-checkpoints", "20"]
        assert main(argv) == 74
        out = capsys.readouterr().out
        failed = [line for line in out.splitlines() if "FAILED" in line]
        assert len(failed) == 1 and "No space left on device" in failed[0]
        summary = json.loads(read(logdir / "summary.json"))
        assert summary["status"] == "failed" and summary["exit_status"] == 74
        assert "No space left on device" in summary["error"]
        names = os.listdir(logdir / "checkpoints")
        assert not [n for n in names if "_temp" in n or ".tmp" in n]
        # The checkpoints written before the disk filled are intact.
        kept = summary["checkpoint"]
        assert kept and tf.train.latest_checkpoint(str(logdir / "checkpoints")) == kept
        tf.train.load_checkpoint(kept).get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE")


def test_lowering_keep_checkpoints_on_a_full_disk_lets_the_rerun_finish(
    tmp_path, capsys
):
    # The README's advice for exit 74: free space or lower --keep-checkpoints.
    with tmpfs(tmp_path / "disk", "size=2m") as disk:
        logdir = disk / "run"
        argv = ["train", *WIDE, "--logdir", str(logdir), "--epochs", "1"]
        argv += ["--steps-per-epoch", "8", "--checkpoint-every", "1"]
        assert main(argv + ["--keep-checkpoints", "20"]) == 74
        filled = checkpoints.scan(str(logdir / "checkpoints"))
        assert len(filled) >= 2
        capsys.readouterr()
        assert main(argv + ["--keep-checkpoints", "2"]) == 0, capsys.readouterr()
        summary = json.loads(read(logdir / "summary.json"))
        assert summary["status"] == "completed" and summary["final_step"] == 8
        steps = [step for step, _ in checkpoints.scan(str(logdir / "checkpoints"))]
        assert steps[-1] == 8 and len(steps) <= 2


def test_a_full_logdir_ends_the_run_with_exit_74_and_no_traceback(tmp_path, capsys):
    # Only the logdir's disk fills (TensorBoard events); checkpoints elsewhere.
    with tmpfs(tmp_path / "disk", "size=64k") as disk:
        argv = ["train", *TINY, "--logdir", str(disk / "run"), "--epochs", "1"]
        argv += ["--checkpoint-dir", str(tmp_path / "ckpt"), "--log-every", "1"]
        argv += ["--steps-per-epoch", "400", "--checkpoint-every", "10"]
        argv[argv.index("--histogram-every") + 1] = "5"
        assert main(argv) == 74
        out = capsys.readouterr().out
        failed = [line for line in out.splitlines() if "FAILED" in line]
        assert len(failed) == 1 and "No space left on device" in failed[0], out[-2000:]
        assert str(disk / "run") in failed[0]
        assert checkpoints.scan(str(tmp_path / "ckpt"))  # those are intact
        gc.collect()  # TensorFlow's event writers close when collected


def test_a_read_only_disk_is_refused_before_training(tmp_path, capsys):
    with tmpfs(tmp_path / "disk", "size=1m,ro") as disk:
        argv = ["train", *WIDE, "--logdir", str(disk / "run")]
        assert main(argv) == 2
        err = capsys.readouterr().err
        # Found by the settings check (os.access) or, failing that, when
        # the directory is created.
        assert "--logdir" in err
        assert re.search(r"is not writable|Read-only file system", err), err
        assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_second_run_is_refused_and_a_dead_runs_lock_is_taken_over(tmp_path):
    logdir = tmp_path / "run"
    extra = ("--epochs", "1", "--steps-per-epoch", "60", "--checkpoint-every", "5")
    # Long enough to be running when the second starts; the third only
    # finishes the first 60 steps (steps_per_epoch may change on resume).
    first = start(logdir, *extra[:3], "5000", *extra[4:])
    try:
        wait_for_checkpoint(first, str(logdir / "checkpoints"))
        second = run_to_end(logdir, *extra)
        assert second.returncode == 2, second.stderr[-2000:]
        assert f"pid {first.pid}" in second.stderr and "Traceback" not in second.stderr
        first.kill()
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    third = run_to_end(logdir, *extra)
    assert third.returncode == 0, third.stdout[-2000:] + third.stderr[-2000:]
    assert "took over the lock" in third.stdout and f"pid {first.pid}" in third.stdout


TINY = [
    "--task",
    "sorted",
    "--num-examples",
    "64",
    "--max-len",
    "8",
    "--num-layers",
    "1",
]
TINY += ["--d-model", "16", "--num-heads", "2", "--histogram-every", "0", "--no-export"]


def test_a_second_run_sharing_the_logdir_is_refused_even_with_its_own_checkpoints(
    tmp_path, capsys
):
    # Both would write logdir/summary.json (and the export, the vocabulary).
    logdir = tmp_path / "run"
    logdir.mkdir()
    first = DirectoryLock(str(logdir))  # the first run's logdir lock
    first.acquire()
    try:
        argv = ["train", *TINY, "--logdir", str(logdir), "--steps-per-epoch", "2"]
        status = main(argv + ["--checkpoint-dir", str(tmp_path / "other")])
    finally:
        first.release()
    err = capsys.readouterr().err
    assert status == 2, err
    assert re.search(r"--logdir .*is in use by another run \(host .* pid \d+", err)
    assert len(err.strip().splitlines()) == 1
    assert not (logdir / "summary.json").exists()
    # Its own checkpoint directory holds at most an empty (free) lock file.
    assert [(p.name, p.read_text()) for p in (tmp_path / "other").iterdir()] in (
        [],
        [("tfnorm.lock", "")],
    )


def test_a_checkpoint_dir_equal_to_the_logdir_takes_one_lock_and_runs(tmp_path, capsys):
    logdir = tmp_path / "run"
    argv = ["train", *TINY, "--logdir", str(logdir), "--steps-per-epoch", "2"]
    assert main(argv + ["--checkpoint-dir", str(logdir)]) == 0, capsys.readouterr()
    summary = json.loads(read(logdir / "summary.json"))
    assert summary["status"] == "completed"
    assert (logdir / "tfnorm.lock").read_text() == ""


def test_checkpoints_of_another_model_are_refused_not_called_damaged(tmp_path, capsys):
    # Without run_config.json (lost, or copied in by hand) the settings cannot
    # be compared; the restore finds other shapes, which is not damage.
    logdir = tmp_path / "run"
    argv = ["train", *TINY, "--logdir", str(logdir), "--steps-per-epoch", "2"]
    assert main(argv) == 0, capsys.readouterr()
    capsys.readouterr()
    (logdir / "checkpoints" / "run_config.json").unlink()
    before = sorted(os.listdir(logdir / "checkpoints"))
    assert main([*argv, "--d-model", "32"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert re.search(
        r"--checkpoint-dir .*ckpt-2 belongs to another model or other settings", err
    ), err
    assert sorted(os.listdir(logdir / "checkpoints")) == before
    assert not (logdir / "checkpoints" / "damaged").exists()


def test_a_file_named_damaged_in_the_checkpoint_dir_is_left_alone(tmp_path, capsys):
    logdir = tmp_path / "run"
    argv = ["train", *TINY, "--logdir", str(logdir), "--steps-per-epoch", "2"]
    assert main([*argv, "--checkpoint-every", "1"]) == 0, capsys.readouterr()
    directory = logdir / "checkpoints"
    (directory / "damaged").write_text("my notes\n")
    data = checkpoints.files_of(str(directory / "ckpt-2"))[-1]
    with open(data, "r+b") as handle:
        handle.truncate(3)
    assert main([*argv, "--epochs", "2"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "skipped damaged checkpoint" in out and "damaged.1" in out
    assert (directory / "damaged").read_text() == "my notes\n"
    assert "ckpt-2.index" in os.listdir(directory / "damaged.1")


def _out_of_memory():
    return tf.errors.ResourceExhaustedError(
        None, None, "OOM when allocating tensor with shape[64,4,2048,2048]"
    )


def test_a_model_that_does_not_fit_in_memory_while_built_is_one_line(
    tmp_path, capsys, monkeypatch
):
    # Past the size check, the allocator may still refuse (another process
    # holds the GPU): nothing is created yet, so it is a one-line error.
    from tfnorm.training.workloads.classifier import ClassifierWorkload

    def build(self, total_steps):
        raise _out_of_memory()

    monkeypatch.setattr(ClassifierWorkload, "build", build)
    logdir = tmp_path / "run"
    assert main(["train", *TINY, "--logdir", str(logdir)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert re.search(r"does not fit in memory while it is built .*OOM when", err)
    assert not logdir.exists()


def test_running_out_of_memory_in_the_first_step_ends_as_failed(
    tmp_path, capsys, monkeypatch
):
    from tfnorm.training.workloads.classifier import ClassifierWorkload

    def step_fn(self, training):
        def step(number):
            raise _out_of_memory()

        return step

    monkeypatch.setattr(ClassifierWorkload, "step_fn", step_fn)
    logdir = tmp_path / "run"
    assert main(["train", *TINY, "--logdir", str(logdir)]) == 74
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err
    assert "FAILED at step 0: out of memory at step 1" in captured.out
    summary = json.loads(read(logdir / "summary.json"))
    assert summary["status"] == "failed" and "OOM when" in summary["error"]


# ----------------------------------------------------------------- kill -9

KILL_FLAGS = ("--epochs", "1", "--steps-per-epoch", "24", "--checkpoint-every", "1")
# Dropout stays at its default (0.1): an exact resume must restore the
# dropout generators too.
KILL_FLAGS += ("--log-every", "4", "--keep-checkpoints", "2")
KILL_FLAGS += ("--no-export",)  # weights are compared in the checkpoints
# The user's own subclassed model on a shuffled tf.data pipeline (the
# iterator is checkpointed), uncompiled: the run's AdamW and warm-up apply.
USER_MODULE = os.path.join(REPO, "tests", "training", "user_module.py")
USER_MODEL_FLAGS = [
    "--model-fn", f"{USER_MODULE}:subclassed_model",
    "--data-fn", f"{USER_MODULE}:dataset_data",
    "--loss", "sparse_categorical_crossentropy", "--from-logits", "--warmup-steps", "4",
]  # fmt: skip


def final_values(logdir):
    """The latest checkpoint's values; the data iterator's state (a variant
    tensor, not comparable) is left out, the weights it led to are in."""
    path = tf.train.latest_checkpoint(str(logdir / "checkpoints"))
    reader = tf.train.load_checkpoint(path)
    dtypes = reader.get_variable_to_dtype_map()
    return path, {
        name: reader.get_tensor(name)
        for name in dtypes
        if name != "_CHECKPOINTABLE_OBJECT_GRAPH" and dtypes[name] != tf.variant
    }


def complete_steps(directory):
    """Steps whose index and data files both exist and whose index reads.

    A kill -9 at a random time can land inside a write (a checkpoint is
    written every step): TensorFlow writes the index in place, so a
    half-written index exists beside a complete data file ("file is too
    short to be an sstable"). That checkpoint was never written; resuming
    from the one before it loses nothing."""
    if not os.path.isdir(directory):
        return []
    names = set(os.listdir(directory))
    steps = []
    for m in (re.match(r"^ckpt-(\d+)\.index$", n) for n in names):
        if m and f"ckpt-{m.group(1)}.data-00000-of-00001" in names:
            try:
                tf.train.load_checkpoint(os.path.join(directory, f"ckpt-{m.group(1)}"))
            except (tf.errors.OpError, ValueError):
                continue
            steps.append(int(m.group(1)))
    return sorted(steps)


def kill_once(logdir, rng, during_write, model_flags=None):
    """Starts a run and kills it -9; returns whether a write was under way."""
    process = start(logdir, *KILL_FLAGS, model_flags=model_flags)
    directory = logdir / "checkpoints"
    writing = False
    try:
        if during_write:
            deadline = time.time() + 240
            while time.time() < deadline and process.poll() is None:
                if os.path.isdir(directory) and any(
                    "_temp" in n for n in os.listdir(directory)
                ):
                    writing = True
                    break
                time.sleep(0.001)
        else:
            wait_for_checkpoint(process, str(directory))
            time.sleep(rng.uniform(0.0, 1.5))
        process.kill()
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    return writing


def kill_9_trials(tmp_path, trials, model_flags=None):
    """Kills `trials` runs -9 (every other one inside a checkpoint write),
    reruns each to the end, and compares with an uninterrupted run."""
    reference = tmp_path / "reference"
    done = subprocess.run(
        command(reference, *KILL_FLAGS, model_flags=model_flags),
        env=environment(),
        cwd=REPO,
        timeout=600,
    )
    assert done.returncode == 0
    _, expected = final_values(reference)
    rng = random.Random(16)
    table = {"tried": 0, "during_write": 0, "survived": 0, "data_lost": 0}
    for trial in range(trials):
        logdir = tmp_path / f"trial{trial}"
        table["during_write"] += kill_once(
            logdir, rng, during_write=trial % 2 == 0, model_flags=model_flags
        )
        table["tried"] += 1
        before = complete_steps(logdir / "checkpoints")
        rerun = run_to_end(logdir, *KILL_FLAGS, model_flags=model_flags)
        assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
        resumed = re.search(r"resumed from step (\d+)", rerun.stdout)
        resumed_step = int(resumed.group(1)) if resumed else 0
        if before and resumed_step < before[-1]:
            table["data_lost"] += 1
        path, actual = final_values(logdir)
        assert path.endswith("ckpt-24")
        if actual.keys() == expected.keys() and all(
            np.array_equal(actual[k], expected[k]) for k in expected
        ):
            table["survived"] += 1
        assert latest_checkpoint_step(str(logdir / "checkpoints")) == 24
    print(f"kill -9 table: {table}")
    return table


@pytest.mark.slow
def test_kill_9_at_random_times_never_loses_a_checkpoint_or_changes_the_result(
    tmp_path,
):
    table = kill_9_trials(tmp_path, 10)
    assert table["survived"] == table["tried"] == 10
    assert table["data_lost"] == 0 and table["during_write"] >= 3


@pytest.mark.slow
def test_kill_9_of_a_users_subclassed_model_on_tf_data_resumes_exactly(tmp_path):
    table = kill_9_trials(tmp_path, 4, model_flags=USER_MODEL_FLAGS)
    assert table["survived"] == table["tried"] == 4
    assert table["data_lost"] == 0 and table["during_write"] >= 1


# ------------------------------------------------------- kill -9 in the export

# A 20000-word embedding makes the export take long enough to be caught.
EXPORT_FLAGS = [
    "--task", "sorted", "--num-examples", "32", "--max-len", "6", "--vocab-size", "20000",
    "--num-layers", "1", "--d-model", "128", "--num-heads", "2", "--dff", "128",
    "--batch-size", "16", "--epochs", "1", "--histogram-every", "0",
]  # fmt: skip


def kill_during_export(logdir):
    """Starts a run and kills it -9 once its export's temporary name appears;
    returns the leftovers it saw (empty when the export was missed)."""
    process = start(logdir, model_flags=EXPORT_FLAGS)
    seen = []
    try:
        deadline = time.time() + 240
        while time.time() < deadline and process.poll() is None and not seen:
            seen = [n for n in os.listdir(logdir) if n.startswith("model.tmp")]
            time.sleep(0.0005)
        process.kill()
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    return [n for n in seen if os.path.lexists(logdir / n)]


@pytest.mark.slow
def test_kill_9_during_the_export_leaves_no_temporary_file_after_the_rerun(tmp_path):
    for attempt in range(3):
        logdir = tmp_path / f"run{attempt}"
        left = kill_during_export(logdir)
        if left:
            break
    assert left, "the export was never caught under way in 3 runs"
    rerun = run_to_end(logdir, model_flags=EXPORT_FLAGS)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
    names = sorted(n for n in os.listdir(logdir) if n.startswith("model"))
    summary = json.loads(read(logdir / "summary.json"))
    assert names == [os.path.basename(summary["model_path"])], (left, names)
    assert summary["export"]["kind"] == "model"


KILLING_MODULE = """
import os
import signal

import numpy as np
import tensorflow as tf


def _kill_at(step):
    if int(step) == int(os.environ.get("KILL_AT_STEP", -1)):
        os.kill(os.getpid(), signal.SIGKILL)


class KilledAtAStep(tf.keras.Model):
    # kill -9 of the process inside the step KILL_AT_STEP names, after the
    # previous steps' events and the last checkpoint were written.
    def train_step(self, data):
        logs = super().train_step(data)
        tf.py_function(_kill_at, [tf.identity(self.optimizer.iterations)], [])
        return logs


def build():
    inputs = tf.keras.Input((4,))
    hidden = tf.keras.layers.LayerNormalization()(tf.keras.layers.Dense(8)(inputs))
    model = KilledAtAStep(inputs, tf.keras.layers.Dense(2)(hidden))
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    return model


def data():
    x = np.random.RandomState(0).normal(size=(64, 4)).astype("float32")
    return x, (np.arange(64) % 2).astype("int32")
"""


def event_steps(directory):
    """`(tag, step)` of every summary in the event files of `directory`."""
    found = []
    for path in sorted(directory.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            found += [(value.tag, event.step) for value in event.summary.value]
    return found


def test_a_resume_after_kill_9_leaves_each_step_once_in_tensorboard(tmp_path):
    module = tmp_path / "killed_at_a_step.py"
    module.write_text(KILLING_MODULE)
    logdir = tmp_path / "run"
    flags = ["--model-fn", f"{module}:build", "--data-fn", f"{module}:data"]
    flags += ["--batch-size", "8", "--checkpoint-every", "3", "--log-every", "1"]
    flags += ["--histogram-every", "2", "--no-export"]
    killed = subprocess.run(
        command(logdir, *flags, model_flags=[]),
        capture_output=True, text=True, cwd=REPO, timeout=600,
        env=dict(environment(), KILL_AT_STEP="5"),
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert latest_checkpoint_step(logdir / "checkpoints") == 3
    assert ("loss", 4) in event_steps(logdir / "train")  # replayed below
    assert main(command(logdir, *flags, model_flags=[])[3:]) == 0  # in-process
    scalars = event_steps(logdir / "train")
    assert sorted(step for tag, step in scalars if tag == "loss") == list(range(1, 9))
    histograms = event_steps(logdir / "norms")
    assert histograms and len(set(histograms)) == len(histograms)
    assert len(set(scalars)) == len(scalars)

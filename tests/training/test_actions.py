"""`tfnorm.training.actions`, each action alone and in the loop's order."""

from __future__ import annotations

import io
import os
import re

import pytest

from tfnorm._keras import keras, tf
from tfnorm.callbacks.base import PeriodicCallback
from tfnorm.training import actions
from tfnorm.training.checkpoints import CheckpointWriteError
from tfnorm.training.loop import Stop, run_loop
from tfnorm.training.run_files import ProgressLog


class Log(ProgressLog):
    def __init__(self):
        super().__init__(io.StringIO())

    @property
    def text(self):
        return self.stream.getvalue()


class FakeWriter:
    """Stands in for a CheckpointWriter; records saves in `events`."""

    def __init__(self, events, directory="/nonexistent", fail_at=None):
        self.events, self.directory, self.fail_at = events, directory, fail_at

    def save(self, step):
        if step == self.fail_at:
            raise CheckpointWriteError(f"could not write checkpoint ckpt-{step}")
        self.events.append(("save", step))
        return f"ckpt-{step}"


class FakeModel:
    def __init__(self, value=1.0):
        self.weights = [tf.Variable([value, 2.0]), tf.Variable([3], dtype=tf.int32)]


def ones(step):
    return {"loss": 0.5, "correct": 4.0}


CADENCE = actions.Cadence(steps_per_epoch=6, total_steps=12, checkpoint_every=4)


def test_cadence_checkpoints_every_n_steps_and_at_epoch_ends():
    assert [s for s in range(1, 13) if CADENCE.checkpoint_due(s)] == [4, 6, 8, 12]
    assert [CADENCE.epoch(s) for s in (1, 6, 7, 12)] == [1, 1, 2, 2]


def test_checkpoint_is_written_before_evaluation_at_epoch_end():
    events, log = [], Log()
    evaluation = actions.Evaluation(
        lambda: events.append(("eval",)) or {"val_loss": 1.0, "val_accuracy": 0.5},
        None,
        CADENCE,
        2,
        log,
    )
    checkpointing = actions.Checkpointing(FakeWriter(events), CADENCE, log)
    run_loop(ones, 0, 12, [checkpointing, evaluation])
    assert events == [
        ("save", 4),
        ("save", 6),
        ("eval",),
        ("save", 8),
        ("save", 12),
        ("eval",),
    ]
    assert checkpointing.last_path == "ckpt-12"


def test_a_failed_checkpoint_write_ends_the_run_as_failed():
    events, log = [], Log()
    checkpointing = actions.Checkpointing(FakeWriter(events, fail_at=8), CADENCE, log)
    result = run_loop(ones, 0, 12, [checkpointing])
    assert (result.status, result.step) == ("failed", 8)
    assert "could not write checkpoint ckpt-8" in result.stop.reason
    assert checkpointing.last_path == "ckpt-6"


def test_a_stop_that_asks_for_a_save_gets_one_unless_just_saved():
    events, log = [], Log()
    checkpointing = actions.Checkpointing(FakeWriter(events), CADENCE, log)
    checkpointing.on_stop(3, Stop("terminated", save=True))
    checkpointing.on_step_end(4, {})
    checkpointing.on_stop(4, Stop("terminated", save=True))
    checkpointing.on_stop(5, Stop("nan", save=False))
    assert events == [("save", 3), ("save", 4)]


def test_scratch_checkpoints_are_deleted_after_each_save(tmp_path):
    scratch = tmp_path / ".worker_1"
    scratch.mkdir()
    checkpointing = actions.Checkpointing(
        FakeWriter([], str(scratch)), CADENCE, Log(), scratch=True
    )
    checkpointing.save(4)
    assert not scratch.exists() and checkpointing.last_path is None


def test_nan_loss_stops_without_counting_the_step():
    log = Log()
    guard = actions.NanGuard(FakeModel(), CADENCE, log, lambda: "ckpt-4")
    assert guard.on_step_end(5, {"loss": 0.3}) is None
    stop = guard.on_step_end(5, {"loss": float("nan")})
    assert (stop.status, stop.save, stop.counted) == ("nan", False, False)
    assert "loss is nan at step 5" in stop.reason and "stays ckpt-4" in stop.reason
    assert "NaN: loss is nan" in log.text


def test_non_finite_weights_stop_before_a_checkpoint_or_a_signal_save():
    model = FakeModel(float("inf"))
    guard = actions.NanGuard(model, CADENCE, Log(), lambda: None)
    # Not a checkpoint step: weights are not read (that waits for the device).
    assert guard.on_step_end(5, {"loss": 0.1}) is None
    stop = guard.on_step_end(6, {"loss": 0.1})
    assert stop.status == "nan" and "weights are no longer finite" in stop.reason
    assert "none saved yet" in stop.reason
    replaced = guard.on_stop(5, Stop("terminated", save=True))
    assert replaced.status == "nan" and not replaced.save
    assert guard.on_stop(5, Stop("nan", save=False)) is None


def test_progress_lines_average_the_window_and_mark_epochs():
    log = Log()
    progress = actions.Progress(log, None, CADENCE, 2, 8, 5, lambda step: 1e-3)
    losses = iter([1.0, 3.0, 2.0, 2.0, 2.0, 4.0] + [1.0] * 6)
    result = run_loop(
        lambda step: {"loss": next(losses), "correct": 4.0}, 0, 12, [progress]
    )
    steps = [int(s) for s in re.findall(r"step (\d+)/12 epoch", log.text)]
    assert steps == [5, 6, 10, 12] and result.status == "completed"
    first = re.search(r"step 5/12 epoch 1/2 loss (\S+) accuracy (\S+)", log.text)
    assert float(first.group(1)) == 2.0 and float(first.group(2)) == 0.5
    assert "step 6/12 epoch 1/2 loss 4.0000" in log.text
    assert progress.metrics["loss"] == 1.0 and progress.metrics["learning_rate"] == 1e-3


class StepRecorder(PeriodicCallback):
    def __init__(self, every_n_steps):
        super().__init__(every_n_steps)
        self.steps = []

    def log(self, step):
        self.steps.append(step)

    def _periodic(self, step):
        self.log(step)

    def on_train_end(self, logs=None):
        self.steps.append("end")


@pytest.mark.parametrize(
    "start, expected", [(0, [0, 4, 6, 8, 12, "end"]), (5, [6, 8, 12, "end"])]
)
def test_histograms_follow_the_callback_cadence_from_any_start(start, expected):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    callback = StepRecorder(4)
    callback.set_model(model)
    run_loop(ones, start, 12, [actions.NormHistograms(callback, 6)])
    assert callback.steps == expected


def test_norm_histograms_for_a_model_write_events(tmp_path):
    import tfnorm

    model = tfnorm.build_classifier(
        10, 4, 2, num_layers=1, d_model=8, num_heads=2, dff=16
    )
    probe = tf.ones((2, 4), tf.int32)
    action = actions.NormHistograms.for_model(model, str(tmp_path), probe, 2, 3)
    run_loop(ones, 0, 3, [action])
    assert any(name.startswith("events.out") for name in os.listdir(tmp_path))


def test_a_signal_stops_after_the_step_and_asks_for_a_save():
    flag, log = actions.StopFlag(), Log()
    stopper = actions.SignalStop(flag, log, lambda: "ckpt-3")
    steps = []

    def step_fn(step):
        steps.append(step)
        if step == 3:
            flag.signal_name = "SIGTERM"
        return {"loss": 0.1, "correct": 1.0}

    result = run_loop(step_fn, 0, 12, [stopper])
    assert (result.status, result.step, steps) == ("terminated", 3, [1, 2, 3])
    assert result.stop.save
    assert "SIGTERM received: checkpoint saved at step 3 (ckpt-3)" in log.text


def test_stop_flag_handles_signals_only_inside_the_block():
    import signal

    before = signal.getsignal(signal.SIGTERM)
    flag = actions.StopFlag()
    with flag.installed(True):
        os.kill(os.getpid(), signal.SIGTERM)
        assert flag.signal_name == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before

"""`tfnorm.training.loop.reporting`: progress lines and norm histograms."""

from __future__ import annotations

import os
import re

import pytest

from tests.training.fakes import CADENCE, Log, ones
from tfnorm._keras import keras, tf
from tfnorm.callbacks.base import PeriodicCallback
from tfnorm.training.loop import reporting
from tfnorm.training.loop.driver import run_loop


def test_progress_lines_average_the_window_every_n_steps_and_at_the_end():
    log = Log()
    progress = reporting.Progress(
        log, logdir=None, cadence=CADENCE, epochs=2, batch_size=8, log_every=5,
        learning_rate=lambda step: 1e-3,
    )  # fmt: skip
    losses = iter([1.0, 3.0, 2.0, 2.0, 2.0, 4.0] + [1.0] * 6)
    result = run_loop(
        lambda step: {"loss": next(losses), "correct": 4.0}, 0, 12, [progress]
    )
    steps = [int(s) for s in re.findall(r"step (\d+)/12 epoch", log.text)]
    assert steps == [5, 10, 12] and result.status == "completed"
    first = re.search(r"step 5/12 epoch 1/2 loss (\S+) accuracy (\S+)", log.text)
    assert float(first.group(1)) == 2.0 and float(first.group(2)) == 0.5
    assert "step 10/12 epoch 2/2 loss 1.6000" in log.text
    assert progress.metrics["loss"] == 1.0 and progress.metrics["learning_rate"] == 1e-3


def test_running_logs_are_reported_as_they_are_then_reset():
    log, resets = Log(), []
    progress = reporting.Progress(
        log, logdir=None, cadence=CADENCE, epochs=2, batch_size=8, log_every=5,
        learning_rate=lambda step: None, reset=lambda: resets.append(1),
    )  # fmt: skip
    run_loop(lambda step: {"loss": 0.25 * step, "auc": 0.5}, 0, 12, [progress])
    assert "step 5/12 epoch 1/2 loss 1.2500 auc 0.5000 lr ?" in log.text
    assert len(resets) == 3 and progress.metrics["loss"] == 3.0


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
    "start, expected", [(0, [0, 5, 10, 12, "end"]), (5, [10, 12, "end"])]
)
def test_histograms_every_n_steps_and_at_the_last_step_from_any_start(start, expected):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    callback = StepRecorder(5)
    callback.set_model(model)
    run_loop(ones, start, 12, [reporting.NormHistograms(callback, 5, CADENCE)])
    assert callback.steps == expected


def test_norm_histograms_for_a_model_write_events(tmp_path):
    import tfnorm

    model = tfnorm.build_classifier(
        10, 4, 2, num_layers=1, d_model=8, num_heads=2, dff=16
    )
    probe = tf.ones((2, 4), tf.int32)
    action = reporting.NormHistograms.for_model(model, str(tmp_path), probe, 2, CADENCE)
    run_loop(ones, 0, 3, [action])
    assert any(name.startswith("events.out") for name in os.listdir(tmp_path))

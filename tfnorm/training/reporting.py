"""The actions that report on a run: progress lines, evaluation, norm histograms.

Progress lines go to the run's log (and the terminal bar); the training and
validation scalars and the norm histograms go to TensorBoard under the
logdir, which a non-chief worker does not have (`logdir=None`).
"""

from __future__ import annotations

import datetime
import math
import os
import time

from tfnorm._keras import tf
from tfnorm.training.loop import Action


class Progress(Action):
    """Progress lines, the terminal bar, and the TensorBoard training scalars.

    A line every `log_every` steps, at each epoch end and at the last step,
    with the window's mean loss and accuracy, the learning rate, examples/s
    (from the second step on: the first includes tracing) and the ETA.
    """

    def __init__(self, log, logdir, cadence, epochs, batch_size, log_every, schedule):
        self.log = log
        self.logdir = logdir
        self.cadence = cadence
        self.epochs = epochs
        self.batch_size = batch_size
        self.log_every = log_every
        self.schedule = schedule
        self.metrics = {}
        self.writer = None
        self._window = [0.0, 0.0, 0]
        self._rate_start, self._rate_examples = None, 0

    def on_start(self, step):
        self.writer = _scalar_writer(self.logdir, "train")

    def on_step_end(self, step, logs):
        self._window = [
            self._window[0] + logs["loss"],
            self._window[1] + logs["correct"],
            self._window[2] + 1,
        ]
        speed, eta = self._speed_and_eta(step)
        total = self.cadence.total_steps
        if step % self.log_every == 0 or self.cadence.epoch_end(step) or step == total:
            self._report(step, speed, eta)
        self.log.bar(
            step,
            total,
            f"step {step}/{total} loss {logs['loss']:.4f} eta {format_duration(eta)}",
        )

    def _speed_and_eta(self, step):
        if self._rate_start is None:
            self._rate_start = time.time()
            return None, None
        self._rate_examples += self.batch_size
        elapsed = time.time() - self._rate_start
        speed = self._rate_examples / elapsed if elapsed > 0 else None
        remaining = (self.cadence.total_steps - step) * self.batch_size
        return speed, (remaining / speed if speed else None)

    def _report(self, step, speed, eta):
        loss, correct, steps = self._window
        self._window = [0.0, 0.0, 0]
        learning_rate = float(self.schedule(step - 1))
        self.metrics = {
            "loss": loss / steps,
            "accuracy": correct / (steps * self.batch_size),
            "learning_rate": learning_rate,
            "examples_per_second": speed,
        }
        _write_scalars(self.writer, self.metrics, step)
        self.log.line(
            f"step {step}/{self.cadence.total_steps} "
            f"epoch {self.cadence.epoch(step)}/{self.epochs} "
            f"loss {self.metrics['loss']:.4f} "
            f"accuracy {self.metrics['accuracy']:.4f} lr {learning_rate:.3e} "
            f"examples/s {'?' if speed is None else round(speed, 1)} "
            f"eta {format_duration(eta)}"
        )

    def on_end(self, result):
        if self.writer is not None:
            self.writer.close()


class Evaluation(Action):
    """Validation loss and accuracy at each epoch end and when the run completes."""

    def __init__(self, evaluate, logdir, cadence, epochs, log):
        self.evaluate = evaluate
        self.logdir = logdir
        self.cadence = cadence
        self.epochs = epochs
        self.log = log
        self.metrics = {}
        self.writer = None

    def on_start(self, step):
        self.writer = _scalar_writer(self.logdir, "validation")

    def on_step_end(self, step, logs):
        if self.cadence.epoch_end(step):
            self._run(step)

    def _run(self, step):
        self.metrics = self.evaluate()
        _write_scalars(
            self.writer, {k[len("val_") :]: v for k, v in self.metrics.items()}, step
        )
        self.log.line(
            f"epoch {step // self.cadence.steps_per_epoch}/{self.epochs} "
            f"val_loss {self.metrics['val_loss']:.4f} "
            f"val_accuracy {self.metrics['val_accuracy']:.4f}"
        )

    def on_end(self, result):
        if result.status == "completed" and not self.metrics:
            self.metrics = self.evaluate()
        if self.writer is not None:
            self.writer.close()


class NormHistograms(Action):
    """Drives a `NormHistogramCallback` with the cadence it has under `fit`.

    Every `every_n_steps` steps and at each epoch end, plus step 0 of a
    fresh run, so the first histogram shows the initialised model.
    """

    def __init__(self, callback, steps_per_epoch):
        self.callback = callback
        self.steps_per_epoch = steps_per_epoch
        self._epoch_start = 0

    @classmethod
    def for_model(cls, model, log_dir, probe_batch, every_n_steps, steps_per_epoch):
        """The action around a new `NormHistogramCallback` for `model`."""
        from tfnorm.callbacks import NormHistogramCallback

        callback = NormHistogramCallback(log_dir, probe_batch, every_n_steps)
        callback.set_model(model)
        return cls(callback, steps_per_epoch)

    def on_start(self, step):
        self.callback.begin_at(step)
        self._epoch_start = step
        if step == 0:
            self.callback.log(0)

    def on_step_end(self, step, logs):
        epoch, index = divmod(step - 1, self.steps_per_epoch)
        if index == 0 and step - 1 != self._epoch_start:
            self._epoch_start = step - 1
            self.callback.on_epoch_begin(epoch)
        self.callback.on_train_batch_end(step - 1 - self._epoch_start)
        if step % self.steps_per_epoch == 0:
            self.callback.on_epoch_end(epoch)

    def on_end(self, result):
        self.callback.on_train_end()


def _scalar_writer(logdir, name):
    """A TensorBoard writer for `logdir/name`, or None without a logdir
    (a non-chief worker)."""
    if logdir is None:
        return None
    return tf.summary.create_file_writer(os.path.join(logdir, name))


def _write_scalars(writer, values, step):
    if writer is None:
        return
    with writer.as_default():
        for name, value in values.items():
            if value is not None:
                tf.summary.scalar(name, value, step=step)
    writer.flush()


def format_duration(seconds):
    if seconds is None or not math.isfinite(seconds):
        return "?"
    return str(datetime.timedelta(seconds=int(round(seconds))))

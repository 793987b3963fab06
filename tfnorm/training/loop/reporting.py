"""The actions that report on a run: progress lines, evaluation, norm histograms.

Progress lines go to the run's log (and the terminal bar); the training and
validation scalars and the norm histograms go to TensorBoard under the
logdir, which a non-chief worker does not have (`logdir=None`). Each
action first drops its directory's events of the steps a resumed run
replays (`rundir.events`), so TensorBoard shows each step once.
"""

from __future__ import annotations

import datetime
import math
import os
import time

from tfnorm._keras import tf
from tfnorm.training.loop.driver import Action
from tfnorm.training.rundir import events


class Progress(Action):
    """Progress lines, the terminal bar, and the TensorBoard training scalars.

    A line every `log_every` steps and at the last step, with the window's
    mean loss and metrics, the learning rate, examples/s (from the second
    step on: the first includes tracing) and the ETA.

    A step's logs are either that step's values (`loss`, and `correct`, the
    count of right answers, from tfnorm's classifier), averaged here over
    the window; or, with `reset`, running means kept by the model (its
    Keras metrics, as under `fit`), reported as they are and then reset by
    calling `reset()`.
    """

    def __init__(
        self, log, *, logdir, cadence, epochs, batch_size, log_every,
        learning_rate, reset=None,
    ):  # fmt: skip
        self.log = log
        self.logdir = logdir
        self.cadence = cadence
        self.epochs = epochs
        self.batch_size = batch_size
        self.log_every = log_every
        self.learning_rate = learning_rate
        self.reset = reset
        self.metrics = {}
        self.writer = None
        self._sums, self._steps = {}, 0
        self._rate_start, self._rate_examples = None, 0

    def on_start(self, step):
        self.writer = _scalar_writer(self.logdir, "train", step)

    def on_step_end(self, step, logs):
        if self.reset is None:
            for name, value in logs.items():
                self._sums[name] = self._sums.get(name, 0.0) + value
            self._steps += 1
        else:
            self._sums, self._steps = dict(logs), 1
        speed, eta = self._speed_and_eta(step)
        total = self.cadence.total_steps
        if self.cadence.every(step, self.log_every):
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
        means = {name: total / self._steps for name, total in self._sums.items()}
        if "correct" in means:
            means["accuracy"] = means.pop("correct") / self.batch_size
        self._sums, self._steps = {}, 0
        if self.reset is not None:
            self.reset()
        learning_rate = self.learning_rate(step)
        self.metrics = dict(
            means, learning_rate=learning_rate, examples_per_second=speed
        )
        _write_scalars(self.writer, self.metrics, step)
        shown = " ".join(f"{name} {value:.4f}" for name, value in means.items())
        rate = "?" if learning_rate is None else f"{learning_rate:.3e}"
        self.log.line(
            f"step {step}/{self.cadence.total_steps} "
            f"epoch {self.cadence.epoch(step)}/{self.epochs} {shown} lr {rate} "
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
        self.writer = _scalar_writer(self.logdir, "validation", step)

    def on_step_end(self, step, logs):
        if self.cadence.epoch_end(step):
            self._run(step)

    def _run(self, step):
        self.metrics = self.evaluate()
        _write_scalars(
            self.writer, {k[len("val_") :]: v for k, v in self.metrics.items()}, step
        )
        shown = " ".join(f"{name} {value:.4f}" for name, value in self.metrics.items())
        self.log.line(
            f"epoch {step // self.cadence.steps_per_epoch}/{self.epochs} {shown}"
        )

    def on_end(self, result):
        if result.status == "completed" and not self.metrics:
            self.metrics = self.evaluate()
        if self.writer is not None:
            self.writer.close()


class NormHistograms(Action):
    """Drives a `NormHistogramCallback`: every `every_n_steps` steps and at
    the last step, plus step 0 of a fresh run, so the first histogram shows
    the initialised model."""

    def __init__(self, callback, every_n_steps, cadence):
        self.callback = callback
        self.every_n_steps = every_n_steps
        self.cadence = cadence

    @classmethod
    def for_model(cls, model, log_dir, probe_batch, every_n_steps, cadence):
        """The action around a new `NormHistogramCallback` for `model`."""
        from tfnorm.callbacks import NormHistogramCallback

        callback = NormHistogramCallback(log_dir, probe_batch, every_n_steps)
        callback.set_model(model)
        return cls(callback, every_n_steps, cadence)

    def on_start(self, step):
        events.purge_from(
            getattr(self.callback, "log_dir", None), first_rewritten(step)
        )
        self.callback.begin_at(step)
        if step == 0:
            self.callback.log(0)

    def on_step_end(self, step, logs):
        if self.cadence.every(step, self.every_n_steps):
            self.callback.log(step)

    def on_end(self, result):
        self.callback.on_train_end()


def _scalar_writer(logdir, name, start):
    """A TensorBoard writer for `logdir/name`, or None without a logdir
    (a non-chief worker); the directory's events of the steps the run will
    write again (resuming from `start`) are dropped first."""
    if logdir is None:
        return None
    events.purge_from(os.path.join(logdir, name), first_rewritten(start))
    return tf.summary.create_file_writer(os.path.join(logdir, name))


def first_rewritten(start):
    """The first step a run resumed from `start` writes events for: the one
    after it, or step 0 (the initial histograms) on a fresh start."""
    return start + 1 if start else 0


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

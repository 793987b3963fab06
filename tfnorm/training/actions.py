"""What `tfnorm train` does around its steps, one `Action` per concern.

The order `train` gives them matters and is part of the design: the NaN guard
runs first, so nothing logs or saves a rejected step; the checkpoint is
written before evaluation, so an evaluation that runs out of memory cannot
cost the epoch; the signal check runs last, after the step's own work.
"""

from __future__ import annotations

import contextlib
import datetime
import math
import os
import shutil
import signal
import threading
import time

from tfnorm._keras import tf
from tfnorm.training.checkpoints import CheckpointWriteError
from tfnorm.training.loop import Action, Stop, StopRun


class Cadence:
    """Which steps are epoch ends, and which get a checkpoint."""

    def __init__(self, steps_per_epoch, total_steps, checkpoint_every):
        self.steps_per_epoch = steps_per_epoch
        self.total_steps = total_steps
        self.checkpoint_every = checkpoint_every

    def epoch_end(self, step):
        return step % self.steps_per_epoch == 0

    def epoch(self, step):
        return math.ceil(step / self.steps_per_epoch)

    def checkpoint_due(self, step):
        return self.epoch_end(step) or step % self.checkpoint_every == 0


class NanGuard(Action):
    """Stops before a non-finite loss or non-finite weights are kept.

    The loss is checked every step (that step does not count); the weights
    before every checkpoint and before the save a signal asks for, so the
    latest checkpoint is always the last good one.
    """

    def __init__(self, model, cadence, log, last_checkpoint, diagnose=None):
        self.model = model
        self.cadence = cadence
        self.log = log
        self.last_checkpoint = last_checkpoint
        self.diagnose = diagnose

    def on_step_end(self, step, logs):
        if not math.isfinite(logs["loss"]):
            report = self._report(f"loss is {logs['loss']}", step)
            return Stop("nan", report, save=False, counted=False)
        if self.cadence.checkpoint_due(step) and not self.weights_finite():
            return self._weights_stop(step)
        return None

    def on_stop(self, step, stop):
        if stop.save and not self.weights_finite():
            return self._weights_stop(step)
        return None

    def weights_finite(self):
        return all(
            bool(tf.reduce_all(tf.math.is_finite(variable)))
            for variable in self.model.weights
            if tf.as_dtype(variable.dtype).is_floating
        )

    def _weights_stop(self, step):
        report = self._report("the weights are no longer finite", step)
        return Stop("nan", report, save=False)

    def _report(self, what, step):
        report = (
            f"{what} at step {step}; stopped without saving, so the last good "
            f"checkpoint stays {self.last_checkpoint() or 'none (none saved yet)'}. "
            f"{self.diagnose(step) if self.diagnose else ''}"
            "Try a lower --learning-rate, a --warmup-steps warm-up, --clipnorm, "
            "or --norm-position pre."
        )
        self.log.line(f"NaN: {report}")
        return report


class Checkpointing(Action):
    """Saves at the cadence's steps and before a stop that asks for it.

    With `scratch=True` (a non-chief worker, which must take part in every
    save because the variables are mirrored) the files are deleted again.
    """

    def __init__(self, writer, cadence, log, last_path=None, scratch=False):
        self.writer = writer
        self.cadence = cadence
        self.log = log
        self.last_path = last_path
        self.scratch = scratch
        self._saved_step = None

    def on_step_end(self, step, logs):
        if self.cadence.checkpoint_due(step):
            self.save(step)
            self.log.line(f"checkpoint saved at step {step}: {self.last_path}")

    def on_stop(self, step, stop):
        if stop.save and self._saved_step != step:
            self.save(step)

    def save(self, step):
        try:
            path = self.writer.save(step)
        except CheckpointWriteError as error:
            raise StopRun(Stop("failed", str(error))) from error
        self._saved_step = step
        if self.scratch:
            shutil.rmtree(self.writer.directory, ignore_errors=True)
        else:
            self.last_path = path


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


class SignalStop(Action):
    """Ends the run after the current step once SIGTERM or SIGINT arrived.

    The stop asks for a checkpoint, so rerunning the same command resumes.
    """

    STATUS = {"SIGTERM": "terminated", "SIGINT": "interrupted"}

    def __init__(self, flag, log, last_checkpoint):
        self.flag = flag
        self.log = log
        self.last_checkpoint = last_checkpoint

    def on_step_end(self, step, logs):
        name = self.flag.signal_name
        if name:
            return Stop(self.STATUS[name], f"{name} received", save=True)
        return None

    def on_end(self, result):
        if result.status in self.STATUS.values():
            self.log.line(
                f"{self.flag.signal_name} received: checkpoint saved at step "
                f"{result.step} ({self.last_checkpoint()}); rerun the same "
                "command to resume"
            )


class StopFlag:
    """Records a SIGTERM/SIGINT so that the loop can stop between steps."""

    def __init__(self):
        self.signal_name = None

    def _handle(self, signum, _frame):
        self.signal_name = signal.Signals(signum).name

    @contextlib.contextmanager
    def installed(self, enabled):
        """Handles both signals inside the block (main thread only)."""
        if not enabled or threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {
            signum: signal.signal(signum, self._handle)
            for signum in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            yield self
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


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


def first_broken_norm(model, probe_batch, step):
    """Names the first norm layer (in call order) that sees NaN/Inf, if any."""
    from tfnorm.callbacks import NormHealthMonitor

    monitor = NormHealthMonitor(probe_batch)
    monitor.set_model(model)
    for problem in monitor.probe_problems(step):
        if "nonfinite" in problem.statistic:
            return (
                f"The first norm layer hit is {problem.layer} "
                f"({problem.statistic} {problem.value:.3g}). "
            )
    return ""


def format_duration(seconds):
    if seconds is None or not math.isfinite(seconds):
        return "?"
    return str(datetime.timedelta(seconds=int(round(seconds))))

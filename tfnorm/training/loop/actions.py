"""What `tfnorm train` does around its steps, one `Action` per concern.

The order `train` gives them matters and is part of the design: the NaN guard
runs first, so nothing logs or saves a rejected step; a checkpoint due at
the same step is written before evaluation, so an evaluation that runs out
of memory cannot cost it; the signal check runs last, after the step's own
work.

This module holds the actions that keep the run's state safe (the cadence of
epochs and checkpoints, the NaN guard, checkpointing); the ones that report
(progress lines, evaluation, norm histograms) are in `reporting.py`, and the
signal stop in `signals.py`.
"""

from __future__ import annotations

import math
import shutil

from tfnorm._keras import tf
from tfnorm.settings.config_error import ConfigError
from tfnorm.training.loop.driver import Action, Stop, StopRun
from tfnorm.training.rundir.checkpoints import CheckpointWriteError


class Cadence:
    """Which steps are epoch ends, and which get a checkpoint.

    Counters count steps: a checkpoint every `checkpoint_every` steps and at
    the last step; epoch ends add one only with `epoch_checkpoints`.
    """

    def __init__(
        self, steps_per_epoch, total_steps, checkpoint_every, epoch_checkpoints=False,
        eval_every=None,
    ):  # fmt: skip
        self.steps_per_epoch = steps_per_epoch
        self.total_steps = total_steps
        self.checkpoint_every = checkpoint_every
        self.epoch_checkpoints = epoch_checkpoints
        self.eval_every = eval_every

    @classmethod
    def for_run(cls, config, steps_per_epoch):
        """The cadence of a `TrainConfig`'s run: `max_steps` ends it, or the
        epochs do, whichever comes first.

        Raises:
            ConfigError: the warm-up is longer than the run.
        """
        ends = [config.max_steps] if config.max_steps else []
        if config.epochs:
            ends.append(config.epochs * steps_per_epoch)
        total_steps = min(ends)
        if config.warmup_steps > total_steps:
            made_of = (
                f"epochs={config.epochs} x steps_per_epoch={steps_per_epoch}"
                if total_steps != config.max_steps
                else f"max_steps={config.max_steps}"
            )
            raise ConfigError(
                "warmup_steps",
                f"warmup_steps exceeds the run's {total_steps} steps "
                f"({made_of}). Received: warmup_steps={config.warmup_steps}",
            )
        return cls(
            steps_per_epoch,
            total_steps,
            config.checkpoint_every,
            epoch_checkpoints=config.epoch_checkpoints,
            eval_every=config.eval_every,
        )

    @property
    def epochs(self):
        """The epochs the run's steps reach into (the last one may be partial)."""
        return self.epoch(self.total_steps)

    def epoch_end(self, step):
        return step % self.steps_per_epoch == 0

    def epoch(self, step):
        return math.ceil(step / self.steps_per_epoch)

    def evaluation_due(self, step):
        """Every `eval_every` steps, else at each epoch end; and at the last step."""
        if self.eval_every:
            return self.every(step, self.eval_every)
        return self.epoch_end(step) or step == self.total_steps

    def every(self, step, period):
        """True every `period` steps and at the last step."""
        return step % period == 0 or step == self.total_steps

    def checkpoint_due(self, step):
        return self.every(step, self.checkpoint_every) or (
            self.epoch_checkpoints and self.epoch_end(step)
        )


class NanGuard(Action):
    """Stops before a non-finite loss or non-finite weights are kept.

    The loss is checked every step (that step does not count); the weights
    before every checkpoint and before the save a signal asks for, so the
    latest checkpoint is always the last good one.
    """

    def __init__(self, model, cadence, log, last_checkpoint, diagnose=None):
        """`diagnose(step)` says what follows where the run stopped: what is
        known of the cause, and what to try."""
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

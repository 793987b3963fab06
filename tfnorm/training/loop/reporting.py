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
from tfnorm.training.loop.driver import Action, Stop, StopRun
from tfnorm.training.rundir import evaluations, events
from tfnorm.training.rundir.checkpoints import CheckpointWriteError


class Progress(Action):
    """Progress lines, the terminal bar, and the TensorBoard training scalars.

    A line every `log_every` steps and at the last step, with the window's
    mean loss and metrics, the learning rate, examples/s (from the second
    step on: the first includes tracing), tokens/s when each example is
    `tokens_per_example` tokens (a language model's windows), and the ETA.

    A step's logs are either that step's values (`loss`, and `correct`, the
    count of right answers, from tfnorm's classifier), averaged here over
    the window; or, with `reset`, running means kept by the model (its
    Keras metrics, as under `fit`), reported as they are and then reset by
    calling `reset()`.
    """

    def __init__(
        self, log, *, logdir, cadence, batch_size, log_every,
        learning_rate, reset=None, epochs=None, tokens_per_example=None,
    ):  # fmt: skip
        self.log = log
        self.logdir = logdir
        self.cadence = cadence
        self.epochs = epochs or cadence.epochs
        self.tokens_per_example = tokens_per_example
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
        tokens = ""
        if self.tokens_per_example:
            per_second = None if speed is None else speed * self.tokens_per_example
            self.metrics["tokens_per_second"] = per_second
            tokens = f"tokens/s {'?' if per_second is None else round(per_second)} "
        _write_scalars(self.writer, self.metrics, step)
        shown = " ".join(f"{name} {value:.4f}" for name, value in means.items())
        rate = "?" if learning_rate is None else f"{learning_rate:.3e}"
        self.log.line(
            f"step {step}/{self.cadence.total_steps} "
            f"epoch {self.cadence.epoch(step)}/{self.epochs} {shown} lr {rate} "
            f"examples/s {'?' if speed is None else round(speed, 1)} {tokens}"
            f"eta {format_duration(eta)}"
        )

    def on_end(self, result):
        if self.writer is not None:
            self.writer.close()


class Evaluation(Action):
    """Validation metrics at the cadence's evaluation steps (`eval_every`
    steps, else each epoch end; always the last step), and at step 0 of a
    fresh run with `initial`.

    `estimate`, when given, is used between those of the last step (which
    use `evaluate`, the whole validation set). With a `record`
    (`rundir.evaluations.EvaluationRecord`), an evaluation due at the step a
    run resumes from that the record does not reach (a kill interrupted it)
    is done again; with `best` (`rundir.evaluations.BestCheckpoint`), every
    evaluation that lowers the validation loss saves the best checkpoint.
    """

    def __init__(
        self, evaluate, logdir, cadence, log, *, estimate=None, initial=False,
        record=None, best=None,
    ):  # fmt: skip
        self.evaluate = evaluate
        self.estimate = estimate
        self.logdir = logdir
        self.cadence = cadence
        self.log = log
        self.initial = initial
        self.record = record
        self.best = best
        self.best_entry = None
        self.metrics = {}
        self.writer = None

    @classmethod
    def for_run(
        cls, evaluate, estimate, logdir, cadence, log, *, initial, paths, best_of
    ):
        """The evaluation of a run (`paths`, its `RunPaths`): its record in
        the checkpoint directory, and with `best_of` (the run's checkpoint)
        the best one kept in `CHECKPOINT_DIR/best`."""
        best = None
        if best_of is not None:
            best = evaluations.BestCheckpoint(
                best_of, paths.own_checkpoint_dir, scratch=not paths.owns_directories
            )
        record = evaluations.EvaluationRecord(
            paths.checkpoint_dir, write=paths.owns_directories
        )
        return cls(
            evaluate, logdir, cadence, log, estimate=estimate, initial=initial,
            record=record, best=best,
        )  # fmt: skip

    def on_start(self, step):
        # A fresh start ignores the record of checkpoints deleted since.
        saved = self.record.read() if self.record and step else {}
        self.best_entry = saved.get("best")
        done = isinstance(saved.get("step"), int) and saved["step"] >= step
        if done and saved["step"] == step:
            self.metrics = dict(saved.get("metrics") or {})
        redo = step > 0 and self.cadence.evaluation_due(step) and not done
        if redo and self.logdir is not None:
            # The interrupted evaluation may have written its scalars.
            events.purge_from(os.path.join(self.logdir, "validation"), step)
        self.writer = _scalar_writer(self.logdir, "validation", step)
        if redo:
            self.log.line(f"evaluating step {step} again (a kill interrupted it)")
        if redo or (step == 0 and self.initial):
            self._run(step)

    def on_step_end(self, step, logs):
        if self.cadence.evaluation_due(step):
            self._run(step)

    def _run(self, step):
        whole = self.estimate is None or step == self.cadence.total_steps
        self.metrics = (self.evaluate if whole else self.estimate)()
        _write_scalars(
            self.writer, {k[len("val_") :]: v for k, v in self.metrics.items()}, step
        )
        shown = " ".join(f"{name} {value:.4f}" for name, value in self.metrics.items())
        if step and self.cadence.epoch_end(step) and not self.cadence.eval_every:
            where = f"epoch {self.cadence.epoch(step)}/{self.cadence.epochs}"
        else:
            where = f"step {step}/{self.cadence.total_steps}"
        note = "" if whole else " (estimate)"
        self.log.line(f"{where} {shown}{note}{self._keep_if_best(step)}")
        if self.record is not None:
            self.record.write(step, self.metrics, self.best_entry)

    def _keep_if_best(self, step):
        loss = self.metrics.get("val_loss")
        if self.best is None or loss is None or not math.isfinite(loss):
            return ""
        if self.best_entry and not loss < self.best_entry["val_loss"]:
            return ""
        try:
            path = self.best.save(step)
        except CheckpointWriteError as error:
            raise StopRun(Stop("failed", str(error))) from error
        self.best_entry = {"step": step, "val_loss": loss, "checkpoint": path}
        return f"; best so far, saved: {path}" if path else ""

    def on_end(self, result):
        if result.status == "completed" and not self.metrics:
            self.metrics = self.evaluate()
        if self.writer is not None:
            self.writer.close()

    @property
    def summary(self):
        """What `summary.json` records of the best checkpoint (None without)."""
        return self.best_entry if self.best is not None else None


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

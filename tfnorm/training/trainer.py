"""`train(config)`: the training run behind `tfnorm train`, callable from a notebook.

A custom loop rather than `model.fit`, because the run must stop and resume
at any step, not only at epoch boundaries. `train` checks everything first,
then assembles the pieces, each in its own module:

* `loop.run_loop` runs the steps (`steps.py`: train/eval steps and the
  seeded batch order, which resume depends on);
* actions (`actions.py`, `reporting.py`, `signals.py`), in this order: the
  NaN guard (a non-finite loss or non-finite weights stop the run before
  anything is saved, so the last good checkpoint stays the latest), the norm
  histograms, progress lines and TensorBoard scalars, checkpoints (every
  `checkpoint_every` steps and at each epoch end), evaluation (after the
  epoch's checkpoint) and the signal stop (SIGTERM/SIGINT finish the step,
  save, and end the run);
* checkpoint files, resume and the directory lock (`checkpoints.py`):
  resume uses the newest checkpoint that restores cleanly, a second run on
  the same directory is refused;
* run files (`run_files.py`): the progress log file, `run_config.json` with
  the run's identity, the vocabulary, `summary.json` and the export.

Nothing is created on disk until the settings and the data are known to be
good. From then on `summary.json` is written however the run ends.

What is left here is the run itself, in the order a run takes it (load the
data, build, claim the directories, train, export, summarise); that is one
concept, so this module stays one file although it is a little over 350
lines.

Multi-worker: every worker runs the same loop; only the chief locks the
directory and keeps checkpoints, logs, the summary and the export (the
others write scratch copies and delete them). A signal must reach every
worker.

Example:

>>> from tfnorm.training import train
>>> summary = train({"task": "sorted", "num_layers": 1, "d_model": 16,
...                  "num_heads": 2, "epochs": 1, "steps_per_epoch": 20,
...                  "logdir": "/tmp/run"})  # doctest: +SKIP
>>> summary["status"], summary["final_step"]  # doctest: +SKIP
('completed', 20)
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import time

from tfnorm import _keras
from tfnorm.training import (
    actions,
    checkpoints,
    reporting,
    resume,
    run_files,
    signals,
    steps,
)
from tfnorm.training import data as data_lib
from tfnorm.training.build import build_training
from tfnorm.training.config import ConfigError, TrainConfig
from tfnorm.training.loop import LoopResult, Stop, run_loop
from tfnorm.training.run_files import EXIT_STATUS, ProgressLog

__all__ = ["EXIT_STATUS", "train"]


def train(config, handle_signals=True, stdout=None):
    """Trains a `build_classifier` model as configured; returns the run summary.

    Args:
        config: a `TrainConfig` or a dict of its fields (the keys of a
            `tfnorm train --config` file).
        handle_signals: when True and called from the main thread, SIGTERM
            and SIGINT save a checkpoint and end the run cleanly instead of
            killing the process; the previous handlers are restored on return.
        stdout: stream for progress lines. Defaults to `sys.stdout`.

    Returns:
        The dict also written to `logdir/summary.json`: `status`
        ("completed", "nan", "terminated", "interrupted" or "failed"),
        `final_step`, `total_steps`, `resumed_from_step` (0 for a fresh
        start), `resumed_from_checkpoint`, `skipped_checkpoints` (damaged
        ones, each with path and reason), `metrics` (the last loss,
        accuracy, learning rate, examples/s and validation metrics),
        `model_path` (None unless completed), `checkpoint`, `nan_report`
        (for status "nan") and `error` (for status "failed").

    Raises:
        ConfigError: a setting is invalid (`error.key` names it), the
            checkpoints belong to another run or none of them restores, or
            another run holds the checkpoint directory.
        DataError: a data file is malformed or empty (names file and line).
    """
    config = _resolved(config)
    flag = signals.StopFlag()
    # The run sets the global dtype policy for its model; a notebook's later
    # models must not inherit it.
    previous_policy = _keras.global_policy_name()
    try:
        with ProgressLog(stdout or sys.stdout, config.log_file) as log:
            with flag.installed(handle_signals):
                return _Run(config, log, flag).run()
    finally:
        _keras.set_global_policy(previous_policy)


def _resolved(config):
    if isinstance(config, dict):
        config = TrainConfig.from_dict(config)
    elif not isinstance(config, TrainConfig):
        raise ConfigError(
            None,
            "config must be a TrainConfig or a dict. "
            f"Received: config={type(config).__name__}",
        )
    return config.resolve()


class _Run:
    """One call of `train`: checks, claims the directories, trains, summarises."""

    def __init__(self, config, log, flag):
        from tfnorm.distribute import is_chief

        self.config = config
        self.log = log
        self.flag = flag
        self.is_chief = is_chief()
        self.vocabulary = self.data_sha256 = None
        self.resumed = resume.Resumed()

    def run(self):
        self.started = time.time()
        inspected = resume.inspect(self.config.checkpoint_dir)
        train_set, val_set = self._load_data(*inspected)
        self.data_summary = run_files.data_summary(train_set, val_set, self.data_sha256)
        cadence = self._cadence(train_set)
        parts = build_training(self.config, train_set, cadence.total_steps)
        with resume.claimed(self.config, self.log, self.is_chief, inspected):
            self.resumed = resume.restore(
                parts.checkpoint, self.config.checkpoint_dir, self.log, self.is_chief
            )
            start = self._start_step(parts, train_set, cadence)
            summary = self._train(parts, train_set, val_set, cadence, start)
            self._write_summary(summary)
            return summary

    # ------------------------------------------------ before anything is written

    def _load_data(self, saved, has_checkpoint):
        """The training and validation sets; every data problem surfaces here."""
        config = self.config
        if config.data:
            self.data_sha256 = run_files.file_sha256(config.data)
        if saved is not None and has_checkpoint:
            run_files.check_same_run(config, saved, self.data_sha256)
        if config.task:
            return data_lib.make_synthetic(
                config.task,
                num_examples=config.num_examples,
                max_len=config.max_len,
                seed=config.seed,
                vocab_size=config.vocab_size,
                num_classes=config.num_classes,
            )
        vocabulary, note = run_files.saved_vocabulary(
            config.checkpoint_dir, has_checkpoint
        )
        if note:
            self.log.line(note)
        train_set, val_set, self.vocabulary = data_lib.load_text_data(
            config.data,
            config.val_data,
            max_len=config.max_len,
            max_tokens=config.vocab_size or 20000,
            vocabulary=vocabulary,
            num_classes=config.num_classes,
            val_split=config.val_split,
            seed=config.seed,
            label_names=run_files.saved_label_names(
                config.checkpoint_dir, has_checkpoint
            ),
        )
        for note in train_set.notes:
            self.log.line(note)
        return train_set, val_set

    def _cadence(self, train_set):
        config = self.config
        steps_per_epoch = config.steps_per_epoch or math.ceil(
            len(train_set) / config.batch_size
        )
        total_steps = config.epochs * steps_per_epoch
        if config.warmup_steps > total_steps:
            raise ConfigError(
                "warmup_steps",
                f"warmup_steps exceeds the run's {total_steps} steps "
                f"(epochs={config.epochs} x steps_per_epoch={steps_per_epoch}). "
                f"Received: warmup_steps={config.warmup_steps}",
            )
        return actions.Cadence(steps_per_epoch, total_steps, config.checkpoint_every)

    def _start_step(self, parts, train_set, cadence):
        if self.resumed.checkpoint:
            start = int(parts.step.numpy())
            self.log.line(f"resumed from step {start} ({self.resumed.checkpoint})")
            return start
        self.log.line(
            f"starting from step 0: {cadence.total_steps} steps "
            f"({self.config.epochs} epochs x {cadence.steps_per_epoch}), "
            f"{len(train_set)} training examples from {train_set.source}, "
            f"{parts.replicas} replica(s), policy {parts.policy}"
        )
        return 0

    def _write_run_files(self, train_set):
        if not self.is_chief:
            return
        identity = {
            "data_sha256": self.data_sha256,
            "vocab_size": train_set.vocab_size,
            "num_classes": train_set.num_classes,
        }
        run_files.write_run_config(self.config, identity)
        if self.vocabulary is not None:
            run_files.save_vocabularies(
                self.vocabulary, self.config, train_set.label_names
            )

    # ------------------------------------------------------------------ training

    def _train(self, parts, train_set, val_set, cadence, start):
        """Runs the loop; returns the summary however it ends (re-raises bugs)."""
        step_fn = steps.classifier_step_fn(
            parts, train_set, self.config.batch_size, self.config.seed
        )
        run_actions = self._actions(parts, train_set, val_set, cadence)
        try:
            self._write_run_files(train_set)
            result = run_loop(step_fn, start, cadence.total_steps, run_actions)
        except BaseException as error:
            # Ctrl-C in a notebook (signals not handled) ends as "interrupted".
            status = "interrupted" if isinstance(error, KeyboardInterrupt) else "failed"
            stop = Stop(status, checkpoints.one_line(error))
            result = LoopResult(status, int(parts.step.numpy()), start, stop)
            # A full disk for the log or run files ends the run like one for
            # a checkpoint; anything else is a bug, reported after the summary.
            if status == "interrupted" or not isinstance(error, OSError):
                self._write_summary(self._summary(result, run_actions, cadence, None))
                raise
        return self._finish(result, parts, run_actions, cadence)

    def _actions(self, parts, train_set, val_set, cadence):
        """The run's actions, in the order the module docstring gives."""
        probe_batch = train_set.ids[: min(len(train_set), 64)]
        checkpointing = self._checkpointing(parts, cadence)
        last_checkpoint = lambda: checkpointing.last_path  # noqa: E731
        # Only the chief writes TensorBoard logs.
        logdir = self.config.logdir if self.is_chief else None
        chosen = [self._nan_guard(parts.model, cadence, probe_batch, last_checkpoint)]
        if logdir and self.config.histogram_every:
            chosen.append(
                self._norm_histograms(parts.model, logdir, probe_batch, cadence)
            )
        chosen.append(self._progress(parts.schedule, logdir, cadence))
        chosen.append(checkpointing)
        if val_set is not None:
            chosen.append(self._evaluation(parts.model, val_set, logdir, cadence))
        chosen.append(signals.SignalStop(self.flag, self.log, last_checkpoint))
        return chosen

    def _nan_guard(self, model, cadence, probe_batch, last_checkpoint):
        def diagnose(step):
            return actions.first_broken_norm(model, probe_batch, step)

        return actions.NanGuard(
            model, cadence, self.log, last_checkpoint, diagnose=diagnose
        )

    def _norm_histograms(self, model, logdir, probe_batch, cadence):
        return reporting.NormHistograms.for_model(
            model,
            os.path.join(logdir, "norms"),
            probe_batch,
            self.config.histogram_every,
            cadence.steps_per_epoch,
        )

    def _progress(self, schedule, logdir, cadence):
        config = self.config
        return reporting.Progress(
            self.log,
            logdir,
            cadence,
            config.epochs,
            config.batch_size,
            config.log_every,
            schedule,
        )

    def _evaluation(self, model, val_set, logdir, cadence):
        config = self.config
        eval_step = steps.make_eval_step(model, config.max_len)
        return reporting.Evaluation(
            lambda: steps.evaluate(eval_step, val_set, config.batch_size),
            logdir,
            cadence,
            config.epochs,
            self.log,
        )

    # ------------------------------------------------------------------ the end

    def _checkpointing(self, parts, cadence):
        writer = checkpoints.CheckpointWriter(
            parts.checkpoint,
            resume.own_checkpoint_dir(self.config, self.is_chief),
            self.config.keep_checkpoints,
            known=self.resumed.known,
        )
        return actions.Checkpointing(
            writer,
            cadence,
            self.log,
            last_path=self.resumed.checkpoint,
            scratch=not self.is_chief,
        )

    def _finish(self, result, parts, run_actions, cadence):
        """Exports a completed run and builds the summary."""
        model_path = None
        if result.status == "completed":
            if self.resumed.checkpoint and result.start_step >= cadence.total_steps:
                self.log.line("the checkpoint is already at the final step")
            if self.config.export:
                try:
                    model_path = self._export(parts.model)
                except OSError as error:
                    result.status = "failed"
                    result.stop = Stop(
                        "failed", f"export failed: {checkpoints.one_line(error)}"
                    )
                else:
                    self.log.line(
                        f"finished at step {result.step}; model exported to {model_path}"
                    )
            else:
                self.log.line(f"finished at step {result.step}; model export skipped")
        if result.status == "failed":
            self.log.line(f"FAILED at step {result.step}: {result.stop.reason}")
        return self._summary(result, run_actions, cadence, model_path)

    def _export(self, model):
        if self.is_chief:
            return run_files.export_model(model, self.config.logdir)
        # Every worker takes part in saving; only the chief's copy is kept.
        scratch = resume.own_checkpoint_dir(self.config, self.is_chief)
        os.makedirs(scratch, exist_ok=True)
        run_files.export_model(model, scratch)
        shutil.rmtree(scratch, ignore_errors=True)
        return None

    def _summary(self, result, run_actions, cadence, model_path):
        metrics = {}
        for action in run_actions:
            metrics.update(getattr(action, "metrics", {}))
        checkpointing = next(
            a for a in run_actions if isinstance(a, actions.Checkpointing)
        )
        return run_files.summary(
            result,
            self.config,
            total_steps=cadence.total_steps,
            metrics=metrics,
            checkpoint=checkpointing.last_path,
            resumed=self.resumed,
            data=self.data_summary,
            model_path=model_path,
            seconds=time.time() - self.started,
        )

    def _write_summary(self, summary):
        if not self.is_chief:
            return
        try:
            run_files.write_summary(self.config.logdir, summary)
        except OSError as error:
            self.log.line(
                f"could not write summary.json: {checkpoints.one_line(error)}"
            )

"""`train(config)`: the training run behind `tfnorm train`, callable from a notebook.

A custom loop rather than `model.fit`, because the run must stop and resume
at any step, not only at epoch boundaries. What is trained is a workload
(`workloads.base.Workload`): tfnorm's classifier on a task or a text file,
or the user's `model_fn` model on their `data_fn` data; the run around it is
the same for both, and this module is that run, in the order a run takes it:
load the data, build, claim the directories, train, export, summarise.

* `loop.driver.run_loop` runs the workload's step function;
* actions (`loop.actions`, `loop.reporting`, `loop.signals`), in this order:
  the NaN guard (a non-finite loss or non-finite weights stop the run before
  anything is saved, so the last good checkpoint stays the latest), the norm
  histograms, progress lines and TensorBoard scalars, checkpoints (every
  `checkpoint_every` steps and at the last step; at epoch ends only with
  `epoch_checkpoints`), evaluation at each epoch end (after a checkpoint of
  the same step) and the signal stop (SIGTERM/SIGINT/SIGHUP finish the step,
  save, and end the run);
* the run directory (`rundir`): resume uses the newest checkpoint that
  restores cleanly, a second run on the same directory is refused by its
  lock, `run_config.json` holds the run's identity, and the outputs are the
  vocabulary, `summary.json`, the export and the progress log; where all of
  these go and whether this process is the chief is `rundir.paths.RunPaths`,
  read once from the config and `TF_CONFIG`.

Nothing is created on disk until the settings, the data and the model are
known to be good. From then on `summary.json` is written however the run
ends.

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

import dataclasses
import os
import shutil
import sys
import time

from tfnorm import _keras
from tfnorm._errors import (
    is_out_of_memory,
    is_output_error,
    one_line,
    output_reason,
)
from tfnorm.settings.config_error import ConfigError
from tfnorm.training.config.train_config import TrainConfig
from tfnorm.training.data import DataError
from tfnorm.training.loop import actions, reporting, signals
from tfnorm.training.loop.driver import LoopResult, Stop, run_loop
from tfnorm.training.rundir import checkpoints, export, outputs, resume, run_identity
from tfnorm.training.rundir.outputs import EXIT_STATUS
from tfnorm.training.rundir.paths import RunPaths
from tfnorm.training.rundir.progress_log import ProgressLog
from tfnorm.training.workloads import user_code
from tfnorm.training.workloads.build import describe_run_decay
from tfnorm.training.workloads.selection import select_workload

__all__ = ["EXIT_STATUS", "train"]


def train(config, handle_signals=True, stdout=None, *, model_fn=None, data_fn=None):
    """Trains a model as configured; returns the run summary.

    The model is `build_classifier` on the configured task or data file, or
    the user's own: `model_fn()` returns a Keras model and `data_fn()` its
    data (see `tfnorm.training.workloads.own_model`), given as callables here or as
    `MODULE:FUNCTION` names in the config (`--model-fn`, `--data-fn`).

    Args:
        config: a `TrainConfig` or a dict of its fields (the keys of a
            `tfnorm train --config` file).
        model_fn: optional callable returning the Keras model to train
            (called under the run's distribution strategy scope).
        data_fn: optional callable returning its training data, or
            `(train, validation)`; required with `model_fn`.
        handle_signals: when True and called from the main thread, SIGTERM,
            SIGINT and SIGHUP (unless ignored, as under nohup) save a
            checkpoint and end the run cleanly instead of killing the
            process; the previous handlers are restored on return.
        stdout: stream for progress lines. Defaults to `sys.stdout`. If it
            stops taking writes (a closed pipe or terminal), progress goes on
            in the log file only and the run continues.

    Returns:
        The dict also written to `logdir/summary.json`: `status`
        ("completed", "nan", "terminated", "interrupted", "hangup",
        "failed" or "bad_data"),
        `final_step`, `total_steps`, `resumed_from_step` (0 for a fresh
        start), `resumed_from_checkpoint`, `skipped_checkpoints` (damaged
        ones, each with path and reason), `metrics` (the last loss, accuracy,
        learning rate, examples/s, tokens/s of a language model, validation
        metrics), `model_path` (None unless completed), `checkpoint`,
        `best_checkpoint` (with `keep_best`), `nan_report` ("nan"), `error`.

    Raises:
        ConfigError: a setting or `TF_CONFIG` is invalid (`error.key` names
            the setting; None for `TF_CONFIG`), the checkpoints belong to
            another run or none of them restores, or another run holds the
            checkpoint directory. A `UserCodeError` (a subclass) when
            `model_fn` or `data_fn` raised: its `details` hold the traceback
            of the user's code.
        DataError: a data file is malformed or empty (names file and line).
    """
    config = _resolved(config, model_fn, data_fn)
    paths = RunPaths.from_config(config)
    flag = signals.StopFlag()
    # The run sets the global dtype policy for its model; a notebook's later
    # models must not inherit it.
    previous_policy = _keras.global_policy_name()
    try:
        with ProgressLog(stdout or sys.stdout, paths.log_file) as log:
            with flag.installed(handle_signals):
                workload = select_workload(config, log, model_fn, data_fn)
                return _Run(config, paths, log, flag, workload).run()
    finally:
        _keras.set_global_policy(previous_policy)


def _resolved(config, model_fn, data_fn):
    if isinstance(config, dict):
        config = TrainConfig.from_dict(config)
    elif not isinstance(config, TrainConfig):
        raise ConfigError(
            None,
            "config must be a TrainConfig or a dict. "
            f"Received: config={type(config).__name__}",
        )
    # Callables are recorded by name: the name is what a resume compares.
    named = {
        key: user_code.describe(function)
        for key, function in (("model_fn", model_fn), ("data_fn", data_fn))
        if function is not None
    }
    if named:
        config = dataclasses.replace(config, **named)
    # A config `tfnorm train` resolved is not checked again (its paths kept).
    return user_code.absolute_paths(config).resolve()


class _Run:
    """One call of `train`: checks, claims the directories, trains, summarises."""

    def __init__(self, config, paths, log, flag, workload):
        self.config = config
        self.paths = paths
        self.log = log
        self.flag = flag
        self.workload = workload
        self.resumed = resume.Resumed()

    def run(self):
        self.started = time.time()
        inspected = resume.inspect(self.paths.checkpoint_dir)
        self.workload.load(*inspected)
        cadence = self._cadence()
        try:
            setup = self.workload.build(cadence.total_steps)
        except Exception as error:
            if not is_out_of_memory(error):
                raise
            # Nothing is created yet: a setting error, like a model too large
            # for the size check.
            raise ConfigError(
                None,
                "the model does not fit in memory while it is built "
                f"({one_line(error)}); lower d_model, dff, "
                "num_layers, max_len, vocab_size or batch_size.",
            ) from None
        with resume.claimed(self.paths, self.log, inspected):
            self.resumed = resume.restore(setup.checkpoint, self.paths, self.log)
            start = self._start_step(setup, cadence)
            summary = self._train(setup, cadence, start)
            self._write_summary(summary)
            return summary

    # ------------------------------------------------ before anything is written

    def _cadence(self):
        config = self.config
        steps_per_epoch = config.steps_per_epoch or self.workload.steps_per_epoch(
            config.batch_size
        )
        return actions.Cadence.for_run(config, steps_per_epoch)

    def _start_step(self, setup, cadence):
        described = describe_run_decay(setup, self.config)
        if described:
            self.log.line(described)
        if self.resumed.checkpoint:
            start = int(setup.step.numpy())
            self.log.line(f"resumed from step {start} ({self.resumed.checkpoint})")
            return start
        examples = len(self.workload)
        self.log.line(
            f"starting from step 0: {cadence.total_steps} steps "
            + (
                f"({self.config.epochs} epochs x {cadence.steps_per_epoch}), "
                if cadence.total_steps != self.config.max_steps
                else f"(max_steps; {cadence.steps_per_epoch} an epoch), "
            )
            + (f"{examples} training examples from " if examples else "data from ")
            + f"{self.workload.source}, "
            f"{setup.replicas} replica(s), policy {setup.policy}"
        )
        return 0

    def _write_run_files(self):
        if not self.paths.owns_directories:
            return
        run_identity.write_run_config(self.paths, self.config, self.workload.identity())
        export.remove_leftovers(self.paths.logdir)  # of an export killed midway
        self.workload.write_files(self.paths)

    # ------------------------------------------------------------------ training

    def _train(self, setup, cadence, start):
        """Runs the loop; returns the summary however it ends (re-raises bugs)."""
        step_fn = self.workload.step_fn(setup)
        run_actions = self._actions(setup, cadence)
        try:
            self._write_run_files()
            result = run_loop(step_fn, start, cadence.total_steps, run_actions)
        except BaseException as error:
            # Ctrl-C in a notebook (signals not handled) ends as "interrupted".
            status = "interrupted" if isinstance(error, KeyboardInterrupt) else "failed"
            if isinstance(error, DataError):  # met mid-run, e.g. a label
                status = "bad_data"
            stop = Stop(status, one_line(error))
            result = LoopResult(status, int(setup.step.numpy()), start, stop)
            # A full disk for the log or run files ends the run like one for
            # a checkpoint, and so does running out of memory; anything else
            # is a bug, reported after the summary. A full disk is asked
            # first: TensorFlow's writers report one as ResourceExhausted.
            if status == "failed" and is_output_error(error):
                stop.reason = output_reason(error, stop.reason)
            elif status == "failed" and is_out_of_memory(error):
                stop.reason = (
                    f"out of memory at step {result.step + 1}: {stop.reason}; "
                    "lower batch_size, max_len or the model's size, and rerun "
                    "to resume"
                )
            else:
                self._write_summary(self._summary(result, run_actions, cadence, None))
                raise
        return self._finish(result, setup, run_actions, cadence)

    def _actions(self, setup, cadence):
        """The run's actions, in the order the module docstring gives."""
        probe_batch = self.workload.probe_batch
        checkpointing = self._checkpointing(setup, cadence)
        last_checkpoint = lambda: checkpointing.last_path  # noqa: E731
        logdir = self.paths.tensorboard_dir
        chosen = [self._nan_guard(setup.model, cadence, probe_batch, last_checkpoint)]
        if logdir and self.config.histogram_every:
            chosen.append(
                self._norm_histograms(setup.model, logdir, probe_batch, cadence)
            )
        chosen.append(self._progress(setup, logdir, cadence))
        chosen.append(checkpointing)
        evaluate = self.workload.evaluate_fn(setup)
        if evaluate is not None:
            chosen.append(self._evaluation(setup, evaluate, logdir, cadence))
        chosen.append(signals.SignalStop(self.flag, self.log, last_checkpoint))
        return chosen

    def _evaluation(self, setup, evaluate, logdir, cadence):
        return reporting.Evaluation.for_run(
            evaluate,
            self.workload.estimate_fn(setup),
            logdir,
            cadence,
            self.log,
            initial=self.workload.evaluates_at_start or bool(self.config.eval_every),
            paths=self.paths,
            best_of=setup.checkpoint if self.config.keep_best else None,
        )

    def _nan_guard(self, model, cadence, probe_batch, last_checkpoint):
        def diagnose(step):
            norms = actions.first_broken_norm(model, probe_batch, step)
            return self.workload.explain_nan(step, norms)

        return actions.NanGuard(
            model, cadence, self.log, last_checkpoint, diagnose=diagnose
        )

    def _norm_histograms(self, model, logdir, probe_batch, cadence):
        return reporting.NormHistograms.for_model(
            model,
            os.path.join(logdir, "norms"),
            probe_batch,
            self.config.histogram_every,
            cadence,
        )

    def _progress(self, setup, logdir, cadence):
        config = self.config
        return reporting.Progress(
            self.log,
            logdir=logdir,
            cadence=cadence,
            batch_size=config.batch_size,
            log_every=config.log_every,
            learning_rate=setup.learning_rate,
            reset=self.workload.reset_window(setup),
            tokens_per_example=self.workload.tokens_per_example,
        )

    # ------------------------------------------------------------------ the end

    def _checkpointing(self, setup, cadence):
        writer = checkpoints.CheckpointWriter(
            setup.checkpoint,
            self.paths.own_checkpoint_dir,
            self.config.keep_checkpoints,
            known=self.resumed.known,
        )
        return actions.Checkpointing(
            writer,
            cadence,
            self.log,
            last_path=self.resumed.checkpoint,
            scratch=not self.paths.owns_directories,
        )

    def _finish(self, result, setup, run_actions, cadence):
        """Exports a completed run and builds the summary."""
        exported = None
        if result.status == "completed":
            if self.resumed.checkpoint and result.start_step >= cadence.total_steps:
                self.log.line("the checkpoint is already at the final step")
            if self.config.export:
                try:
                    exported = self._export(setup.model)
                except OSError as error:
                    result.status = "failed"
                    result.stop = Stop("failed", f"export failed: {one_line(error)}")
                else:
                    said = exported.describe() if exported else "model exported"
                    self.log.line(f"finished at step {result.step}; {said}")
            else:
                self.log.line(f"finished at step {result.step}; model export skipped")
        if result.status == "failed":
            self.log.line(f"FAILED at step {result.step}: {result.stop.reason}")
        return self._summary(result, run_actions, cadence, exported)

    def _export(self, model):
        directory = self.paths.export_dir
        if self.paths.owns_directories:
            return self.workload.export(model, directory)
        # Every worker takes part in saving; only the chief's copy is kept.
        os.makedirs(directory, exist_ok=True)
        self.workload.export(model, directory)
        shutil.rmtree(directory, ignore_errors=True)
        return None

    def _summary(self, result, run_actions, cadence, exported):
        metrics = {}
        for action in run_actions:
            metrics.update(action.metrics)
        checkpointing = next(
            a for a in run_actions if isinstance(a, actions.Checkpointing)
        )
        evaluation = [a for a in run_actions if isinstance(a, reporting.Evaluation)]
        return outputs.summary(
            result,
            self.config,
            total_steps=cadence.total_steps,
            metrics=metrics,
            checkpoint=checkpointing.last_path,
            resumed=self.resumed,
            data=self.workload.data_summary,
            model_path=exported.path if exported else None,
            seconds=time.time() - self.started,
            export=exported.to_dict() if exported else None,
            best_checkpoint=evaluation[0].summary if evaluation else None,
        )

    def _write_summary(self, summary):
        if not self.paths.owns_directories:
            return
        try:
            outputs.write_summary(self.paths, summary)
        except OSError as error:
            self.log.line(f"could not write summary.json: {one_line(error)}")

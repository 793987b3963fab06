"""`train(config)`: the training loop behind `tfnorm train`, callable from a notebook.

A custom loop rather than `model.fit`, because the loop must stop and resume
at any step, not only at epoch boundaries:

* **Checkpoints** (`tf.train.Checkpoint` + `CheckpointManager`) hold the model,
  the optimizer, the step counter and the data position (examples consumed
  from a seeded, deterministic order). They are written every
  `checkpoint_every` steps and at each epoch end.
* **Resume**: a run whose `checkpoint_dir` holds a checkpoint continues from
  it and stops at the same total step count (`epochs * steps_per_epoch`) as
  an uninterrupted run; the log says "resumed from step N". The vocabulary of
  a text dataset is reloaded from the checkpoint directory so ids stay stable.
* **Signals**: SIGTERM (what `docker stop` and `kill` send) and SIGINT finish
  the current step, write a checkpoint and `summary.json`, and return with
  status "terminated" / "interrupted"; the CLI then exits with 143 / 130.
* **NaN**: a non-finite loss stops the run before anything is saved, so the
  last good checkpoint stays the latest; the report goes to the log and to
  `summary.json` (status "nan", CLI exit status 3).
* **Logs**: line-buffered progress lines (step, loss, accuracy, learning rate,
  examples/s, ETA) on stdout and in `log_file`, a progress bar instead when
  stdout is a terminal; TensorBoard scalars and norm histograms in `logdir`.
* **Result**: the model exported in the runtime's native format
  (`logdir/model.keras`, or the `logdir/model` SavedModel directory on
  Keras 2.9), reloadable with `keras.models.load_model` after `import tfnorm`
  (skipped with `export=False` / `--no-export`), and `logdir/summary.json`.
* **Multi-worker**: every worker runs the same loop; only the chief keeps
  checkpoints, logs, the summary and the export (the others write scratch
  copies and delete them). A signal must reach every worker.
* **Gradient clipping** (`clipnorm`) is done here by the global norm of the
  gradients summed over all replicas, not by the optimizer, whose clipping
  would see each replica's part only under MirroredStrategy.

Example:

>>> from tfnorm.training import train
>>> summary = train({"task": "sorted", "num_layers": 1, "d_model": 16,
...                  "num_heads": 2, "epochs": 1, "steps_per_epoch": 20,
...                  "logdir": "/tmp/run"})  # doctest: +SKIP
>>> summary["status"], summary["final_step"]  # doctest: +SKIP
('completed', 20)
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import shutil
import signal
import sys
import threading
import time

import numpy as np

from tfnorm import _keras
from tfnorm._keras import keras, tf
from tfnorm.training import data as data_lib
from tfnorm.training.config import RESUME_KEYS, ConfigError, TrainConfig

#: `summary["status"]` values and the exit status `tfnorm train` gives each.
EXIT_STATUS = {
    "completed": 0,
    "nan": 3,
    "interrupted": 130,  # SIGINT, as a shell reports 128 + 2
    "terminated": 143,  # SIGTERM, as a shell reports 128 + 15
}

RUN_CONFIG_FILE = "run_config.json"
SUMMARY_FILE = "summary.json"


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
        ("completed", "nan", "terminated" or "interrupted"), `final_step`,
        `total_steps`, `resumed_from_step` (0 for a fresh start), `metrics`
        (the last loss, accuracy, learning rate, examples/s and validation
        metrics), `model_path` (None unless completed), `checkpoint`,
        `nan_report` (for status "nan").

    Raises:
        ConfigError: a setting is invalid (`error.key` names it).
        DataError: a data file is malformed or empty (names file and line).
    """
    if isinstance(config, dict):
        config = TrainConfig.from_dict(config)
    elif not isinstance(config, TrainConfig):
        raise ConfigError(
            None,
            "config must be a TrainConfig or a dict. "
            f"Received: config={type(config).__name__}",
        )
    config = TrainConfig(**config.to_dict()).validate()
    stop = _StopFlag()
    # The run sets the global dtype policy for its model; a notebook's later
    # models must not inherit it.
    previous_policy = _keras.global_policy_name()
    try:
        with _ProgressLog(config.log_file, stdout or sys.stdout) as log:
            with stop.installed(handle_signals):
                return _Run(config, log, stop).run()
    finally:
        _keras.set_global_policy(previous_policy)


class _StopFlag:
    """Records a SIGTERM/SIGINT so the loop can stop between steps."""

    def __init__(self):
        self.signal_name = None

    def _handle(self, signum, _frame):
        self.signal_name = signal.Signals(signum).name

    @contextlib.contextmanager
    def installed(self, enabled):
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


class _ProgressLog:
    """Writes progress to stdout and an optional log file, line by line.

    A log file or a pipe gets one complete line per report so that
    `tail -f` and `nohup` show progress as it happens; a terminal gets a
    progress bar redrawn in place, with the same lines printed above it.
    """

    def __init__(self, log_file, stream):
        self.stream = stream
        self.is_tty = bool(getattr(stream, "isatty", lambda: False)())
        self.file = None
        if log_file:
            directory = os.path.dirname(os.path.abspath(log_file))
            os.makedirs(directory, exist_ok=True)
            self.file = open(log_file, "a", buffering=1, encoding="utf-8")
        self._bar_shown = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._clear_bar()
        if self.file:
            self.file.close()

    def line(self, text):
        stamped = f"[{datetime.datetime.now().strftime('%H:%M:%S')}] {text}"
        self._clear_bar()
        self.stream.write(stamped + "\n")
        self.stream.flush()
        if self.file:
            self.file.write(stamped + "\n")

    def bar(self, step, total, text):
        if not self.is_tty:
            return
        width = 24
        filled = int(width * step / max(total, 1))
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {text}\x1b[K")
        self.stream.flush()
        self._bar_shown = True

    def _clear_bar(self):
        if self._bar_shown:
            self.stream.write("\r\x1b[K")
            self._bar_shown = False


def _format_duration(seconds):
    if seconds is None or not math.isfinite(seconds):
        return "?"
    return str(datetime.timedelta(seconds=int(round(seconds))))


class _Run:
    def __init__(self, config, log, stop):
        self.config = config
        self.log = log
        self.stop = stop

    # ------------------------------------------------------------------ setup

    def _load_data(self):
        config = self.config
        if config.task:
            train, val = data_lib.make_synthetic(
                config.task,
                num_examples=config.num_examples,
                max_len=config.max_len,
                seed=config.seed,
                vocab_size=config.vocab_size,
                num_classes=config.num_classes,
            )
            return train, val
        vocabulary = data_lib.load_vocabulary(config.checkpoint_dir)
        train, val, vocabulary = data_lib.load_text_data(
            config.data,
            config.val_data,
            max_len=config.max_len,
            max_tokens=config.vocab_size or 20000,
            vocabulary=vocabulary,
            num_classes=config.num_classes,
        )
        self.vocabulary = vocabulary
        return train, val

    def _check_resume_config(self):
        """Refuses to resume a checkpoint made with other model or data settings."""
        path = os.path.join(self.config.checkpoint_dir, RUN_CONFIG_FILE)
        if not os.path.isfile(path):
            return
        with open(path, encoding="utf-8") as handle:
            saved = json.load(handle)
        current = self.config.to_dict()
        differences = [
            f"{key}: checkpoint {saved.get(key)!r}, now {current[key]!r}"
            for key in RESUME_KEYS
            if key in saved and saved.get(key) != current[key]
        ]
        if differences and self._has_checkpoint():
            raise ConfigError(
                "checkpoint_dir",
                f"{self.config.checkpoint_dir} holds checkpoints of a run with other "
                f"settings ({'; '.join(differences)}). Use another checkpoint_dir "
                "(--checkpoint-dir) or the original settings. Received: "
                f"checkpoint_dir={self.config.checkpoint_dir!r}",
            )

    def _has_checkpoint(self):
        return tf.train.latest_checkpoint(self.config.checkpoint_dir) is not None

    def _build(self, train_set):
        from tfnorm.distribute import get_strategy, is_chief
        from tfnorm.models import build_classifier
        from tfnorm.training.optimizers import make_optimizer
        from tfnorm.training.precision import (
            set_mixed_precision,
            wrap_for_mixed_precision,
        )
        from tfnorm.training.schedules import WarmupSchedule

        config = self.config
        self.strategy = get_strategy(config.strategy, devices=config.devices)
        self.replicas = self.strategy.num_replicas_in_sync
        if config.batch_size % self.replicas:
            raise ConfigError(
                "batch_size",
                f"The global batch_size must divide evenly over the "
                f"{self.replicas} replicas of the {config.strategy!r} strategy. "
                f"Received: batch_size={config.batch_size}",
            )
        self.policy = set_mixed_precision(config.mixed_precision)
        keras.utils.set_random_seed(config.seed)
        with self.strategy.scope():
            self.model = build_classifier(
                train_set.vocab_size,
                config.max_len,
                train_set.num_classes,
                num_layers=config.num_layers,
                d_model=config.d_model,
                num_heads=config.num_heads,
                dff=config.dff,
                norm=config.norm,
                norm_position=config.norm_position,
                pooling=config.pooling,
                dropout_rate=config.dropout_rate,
                epsilon=config.epsilon,
            )
            self.schedule = WarmupSchedule(
                config.learning_rate,
                config.warmup_steps,
                self.total_steps,
                decay=config.decay,
            )
            optimizer = make_optimizer(
                config.optimizer,
                learning_rate=self.schedule,
                weight_decay=config.weight_decay,
                clipnorm=None,  # clipped in the train step, after the all-reduce
                model=self.model,
            )
            self.optimizer = wrap_for_mixed_precision(optimizer)
            _keras.build_optimizer(self.optimizer, self.model.trainable_variables)
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
            self.examples_seen = tf.Variable(
                0, dtype=tf.int64, trainable=False, name="examples_seen"
            )
        self.checkpoint = tf.train.Checkpoint(
            model=self.model,
            optimizer=_keras.checkpointable_optimizer(self.optimizer),
            step=self.step,
            examples_seen=self.examples_seen,
        )
        self.is_chief = is_chief()
        directory = config.checkpoint_dir
        if not self.is_chief:
            # Every worker must take part in saving (the variables are
            # mirrored), but only the chief's files are kept.
            task = json.loads(os.environ["TF_CONFIG"]).get("task", {})
            directory = os.path.join(
                directory, f".{task.get('type')}_{task.get('index')}"
            )
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, directory, max_to_keep=config.keep_checkpoints
        )

    # ---------------------------------------------------------------- steps

    def _make_step_functions(self):
        model, optimizer, strategy = self.model, self.optimizer, self.strategy
        global_batch = self.config.batch_size
        clipnorm = self.config.clipnorm
        replicas = self.replicas

        def clip_by_global_norm(gradients):
            # The optimizers' own clipping would see each replica's partial
            # gradient under MirroredStrategy (Keras 3 clips before the
            # all-reduce), so the norm is taken here over the summed
            # gradients. Keras 3 unscales mixed-precision gradients only inside
            # `apply_gradients`: clipping scaled gradients at clipnorm * scale
            # is the same clip.
            if replicas > 1:
                context = tf.distribute.get_replica_context()
                gradients = context.all_reduce(tf.distribute.ReduceOp.SUM, gradients)
            scale = _keras.pending_loss_scale(optimizer)
            clipped, _ = tf.clip_by_global_norm(gradients, clipnorm * scale)
            if replicas > 1:
                # `apply_gradients` sums over the replicas once more.
                clipped = [g / replicas for g in clipped]
            return clipped

        def replica_step(ids, labels):
            with tf.GradientTape() as tape:
                logits = tf.cast(model(ids, training=True), tf.float32)
                per_example = _sparse_ce(labels, logits)
                loss = tf.nn.compute_average_loss(
                    per_example, global_batch_size=global_batch
                )
                scaled_loss = _keras.scale_loss(optimizer, loss)
            variables = model.trainable_variables
            gradients = tape.gradient(scaled_loss, variables)
            gradients = _keras.unscale_gradients(optimizer, gradients)
            # Embedding gradients arrive as IndexedSlices whose row count
            # depends on each replica's tokens; the all-reduce across replicas
            # needs equal shapes, so they are made dense.
            gradients = [
                tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                for g in gradients
            ]
            if clipnorm is not None:
                gradients = clip_by_global_norm(gradients)
            optimizer.apply_gradients(zip(gradients, variables))
            correct = tf.reduce_sum(
                tf.cast(
                    tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels),
                    tf.float32,
                )
            )
            return loss, correct

        # No Python control flow depends on tensors here, and autograph's
        # conversion of the Keras call stack costs seconds per trace.
        @tf.function(autograph=False)
        def train_step(ids, labels):
            loss, correct = strategy.run(replica_step, args=(ids, labels))
            return (
                strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None),
                strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None),
            )

        @tf.function(
            autograph=False,
            input_signature=[
                tf.TensorSpec([None, self.config.max_len], tf.int32),
                tf.TensorSpec([None], tf.int32),
            ],
        )
        def eval_step(ids, labels):
            logits = tf.cast(model(ids, training=False), tf.float32)
            per_example = _sparse_ce(labels, logits)
            correct = tf.cast(
                tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels),
                tf.float32,
            )
            return tf.reduce_sum(per_example), tf.reduce_sum(correct)

        self.train_step, self.eval_step = train_step, eval_step

    def _distribute(self, ids, labels):
        """Splits one global batch over the replicas."""
        replicas = self.replicas
        if replicas == 1 and not isinstance(
            self.strategy, tf.distribute.MultiWorkerMirroredStrategy
        ):
            return tf.constant(ids), tf.constant(labels)
        per_replica = ids.shape[0] // replicas

        def value_fn(context):
            index = context.replica_id_in_sync_group
            part = slice(index * per_replica, (index + 1) * per_replica)
            return tf.constant(ids[part]), tf.constant(labels[part])

        return self.strategy.experimental_distribute_values_from_function(value_fn)

    def _batches(self, train_set, start_example):
        """Global batches in a fixed order that depends only on the seed.

        Pass `p` over the training set visits the examples in permutation
        `p` (seeded by `seed` and `p`); the stream of passes is cut into
        batches of `batch_size`. Starting at `start_example` reproduces exactly
        the batches an uninterrupted run would have seen from there.
        """
        size, batch = len(train_set), self.config.batch_size
        pass_index, offset = divmod(int(start_example), size)
        order = self._permutation(pass_index, size)
        while True:
            indices = []
            while len(indices) < batch:
                take = order[offset : offset + batch - len(indices)]
                indices.extend(take.tolist())
                offset += len(take)
                if offset == size:
                    pass_index, offset = pass_index + 1, 0
                    order = self._permutation(pass_index, size)
            yield train_set.ids[indices], train_set.labels[indices]

    def _permutation(self, pass_index, size):
        seed = (self.config.seed * 1000003 + pass_index * 7919 + 17) % (2**31 - 1)
        return np.random.RandomState(seed).permutation(size)

    def _evaluate(self, val_set):
        if val_set is None:
            return {}
        total_loss = total_correct = 0.0
        batch = max(self.config.batch_size, 64)
        for start in range(0, len(val_set), batch):
            loss, correct = self.eval_step(
                tf.constant(val_set.ids[start : start + batch]),
                tf.constant(val_set.labels[start : start + batch]),
            )
            total_loss += float(loss)
            total_correct += float(correct)
        return {
            "val_loss": total_loss / len(val_set),
            "val_accuracy": total_correct / len(val_set),
        }

    # --------------------------------------------------------------- outputs

    def _weights_finite(self):
        return all(
            bool(tf.reduce_all(tf.math.is_finite(variable)))
            for variable in self.model.weights
            if tf.as_dtype(variable.dtype).is_floating
        )

    def _nan_report(self, what, step, last_checkpoint):
        report = (
            f"{what} at step {step}; stopped without saving, so the last good "
            f"checkpoint stays {last_checkpoint or 'none (none saved yet)'}. "
            f"{self._first_broken_norm(step)}"
            "Try a lower --learning-rate, a --warmup-steps warm-up, --clipnorm, "
            "or --norm-position pre."
        )
        self.log.line(f"NaN: {report}")
        return report

    def _first_broken_norm(self, step):
        """Names the first norm layer (in call order) that sees NaN/Inf, if any."""
        try:
            from tfnorm.callbacks import NormHealthMonitor
        except ImportError:
            return ""
        monitor = NormHealthMonitor(self.probe_batch)
        monitor.set_model(self.model)
        for problem in monitor.probe_problems(step):
            if "nonfinite" in problem.statistic:
                return (
                    f"The first norm layer hit is {problem.layer} "
                    f"({problem.statistic} {problem.value:.3g}). "
                )
        return ""

    def _save_checkpoint(self):
        path = self.manager.save(checkpoint_number=int(self.step.numpy()))
        if not self.is_chief:
            shutil.rmtree(self.manager.directory, ignore_errors=True)
            return None
        return path

    def _write_summary(self, summary):
        if not self.is_chief:
            return
        path = os.path.join(self.config.logdir, SUMMARY_FILE)
        temporary = path + ".tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(summary, handle, indent=2, default=_json_default)
            handle.write("\n")
        os.replace(temporary, path)

    def _export(self):
        base = os.path.join(self.config.logdir, "model")
        if not self.is_chief:
            base = os.path.join(self.manager.directory, "model")
            os.makedirs(self.manager.directory, exist_ok=True)
        path = _keras.save_model(self.model, base)
        if not self.is_chief:
            shutil.rmtree(self.manager.directory, ignore_errors=True)
            return None
        return path

    def _norm_callback(self):
        """The observability issue's norm histograms, when that module is present."""
        try:
            from tfnorm.callbacks import NormHistogramCallback
        except ImportError:
            return None
        callback = NormHistogramCallback(
            os.path.join(self.config.logdir, "norms"),
            self.probe_batch,
            every_n_steps=self.config.histogram_every,
        )
        callback.set_model(self.model)
        return callback

    # ------------------------------------------------------------------ run

    def run(self):
        config = self.config
        started = time.time()
        os.makedirs(config.logdir, exist_ok=True)
        os.makedirs(config.checkpoint_dir, exist_ok=True)
        self._check_resume_config()
        # Every data problem surfaces here, before a model is built.
        train_set, val_set = self._load_data()
        self.steps_per_epoch = config.steps_per_epoch or math.ceil(
            len(train_set) / config.batch_size
        )
        self.total_steps = config.epochs * self.steps_per_epoch
        if config.warmup_steps > self.total_steps:
            raise ConfigError(
                "warmup_steps",
                f"warmup_steps exceeds the run's {self.total_steps} steps "
                f"(epochs={config.epochs} x steps_per_epoch={self.steps_per_epoch}). "
                f"Received: warmup_steps={config.warmup_steps}",
            )
        self._build(train_set)
        self.probe_batch = train_set.ids[: min(len(train_set), 64)]

        latest = (
            self.manager.latest_checkpoint
            if self.is_chief
            else (tf.train.latest_checkpoint(config.checkpoint_dir))
        )
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
            resumed_from = int(self.step.numpy())
            self.log.line(f"resumed from step {resumed_from} ({latest})")
        else:
            resumed_from = 0
            self.log.line(
                f"starting from step 0: {self.total_steps} steps "
                f"({config.epochs} epochs x {self.steps_per_epoch}), "
                f"{len(train_set)} training examples from {train_set.source}, "
                f"{self.replicas} replica(s), policy {self.policy}"
            )
        if self.is_chief:
            with open(
                os.path.join(config.checkpoint_dir, RUN_CONFIG_FILE),
                "w",
                encoding="utf-8",
            ) as handle:
                json.dump(config.to_dict(), handle, indent=2)
            if getattr(self, "vocabulary", None) is not None:
                data_lib.save_vocabulary(self.vocabulary, config.checkpoint_dir)
                data_lib.save_vocabulary(self.vocabulary, config.logdir)

        self._make_step_functions()
        writer = tf.summary.create_file_writer(os.path.join(config.logdir, "train"))
        val_writer = tf.summary.create_file_writer(
            os.path.join(config.logdir, "validation")
        )
        norm_callback = None
        if self.is_chief and config.histogram_every:
            norm_callback = self._norm_callback()
        if norm_callback is not None and resumed_from == 0:
            norm_callback.log(0)
        metrics = {}
        status, nan_report, last_checkpoint = "completed", None, latest
        batches = self._batches(train_set, int(self.examples_seen.numpy()))
        step = resumed_from
        window_loss = window_correct = 0.0
        window_steps = 0
        rate_start, rate_examples = None, 0

        while step < self.total_steps:
            ids, labels = next(batches)
            loss, correct = self.train_step(*self._distribute(ids, labels))
            loss, correct = float(loss), float(correct)
            if not math.isfinite(loss):
                status = "nan"
                nan_report = self._nan_report(
                    f"loss is {loss}", step + 1, last_checkpoint
                )
                break
            step += 1
            self.step.assign(step)
            self.examples_seen.assign_add(config.batch_size)
            window_loss += loss
            window_correct += correct
            window_steps += 1
            # The first step includes tracing; the rate starts after it.
            if rate_start is None:
                rate_start = time.time()
            else:
                rate_examples += config.batch_size
            elapsed = time.time() - rate_start
            speed = rate_examples / elapsed if elapsed > 0 and rate_examples else None
            eta = (
                (self.total_steps - step) * config.batch_size / speed if speed else None
            )
            if norm_callback is not None and step % config.histogram_every == 0:
                norm_callback.log(step)
            epoch_end = step % self.steps_per_epoch == 0
            if step % config.log_every == 0 or epoch_end or step == self.total_steps:
                learning_rate = float(self.schedule(step - 1))
                metrics = {
                    "loss": window_loss / window_steps,
                    "accuracy": window_correct / (window_steps * config.batch_size),
                    "learning_rate": learning_rate,
                    "examples_per_second": speed,
                }
                window_loss = window_correct = 0.0
                window_steps = 0
                with writer.as_default():
                    for name, value in metrics.items():
                        if value is not None:
                            tf.summary.scalar(name, value, step=step)
                writer.flush()
                self.log.line(
                    f"step {step}/{self.total_steps} "
                    f"epoch {math.ceil(step / self.steps_per_epoch)}/{config.epochs} "
                    f"loss {metrics['loss']:.4f} accuracy {metrics['accuracy']:.4f} "
                    f"lr {learning_rate:.3e} "
                    f"examples/s {'?' if speed is None else round(speed, 1)} "
                    f"eta {_format_duration(eta)}"
                )
            self.log.bar(
                step,
                self.total_steps,
                f"step {step}/{self.total_steps} loss {loss:.4f} "
                f"eta {_format_duration(eta)}",
            )
            if epoch_end:
                val_metrics = self._evaluate(val_set)
                if val_metrics:
                    metrics.update(val_metrics)
                    with val_writer.as_default():
                        for name, value in val_metrics.items():
                            tf.summary.scalar(name[4:], value, step=step)
                    val_writer.flush()
                    self.log.line(
                        f"epoch {step // self.steps_per_epoch}/{config.epochs} "
                        f"val_loss {val_metrics['val_loss']:.4f} "
                        f"val_accuracy {val_metrics['val_accuracy']:.4f}"
                    )
            if epoch_end or step % config.checkpoint_every == 0:
                if not self._weights_finite():
                    status = "nan"
                    nan_report = self._nan_report(
                        "the weights are no longer finite", step, last_checkpoint
                    )
                    break
                last_checkpoint = self._save_checkpoint() or last_checkpoint
                self.log.line(f"checkpoint saved at step {step}: {last_checkpoint}")
            if self.stop.signal_name:
                status = (
                    "terminated"
                    if self.stop.signal_name == "SIGTERM"
                    else "interrupted"
                )
                break

        if status in ("terminated", "interrupted"):
            if not (epoch_end or step % config.checkpoint_every == 0):
                if self._weights_finite():
                    last_checkpoint = self._save_checkpoint() or last_checkpoint
                else:
                    status = "nan"
                    nan_report = self._nan_report(
                        "the weights are no longer finite", step, last_checkpoint
                    )
        if status in ("terminated", "interrupted"):
            self.log.line(
                f"{self.stop.signal_name} received: checkpoint saved at step {step} "
                f"({last_checkpoint}); rerun the same command to resume"
            )
        model_path = None
        if status == "completed":
            if resumed_from == self.total_steps:
                self.log.line("the checkpoint is already at the final step")
            metrics.update(
                self._evaluate(val_set) if not metrics.get("val_loss") else {}
            )
            if config.export:
                model_path = self._export()
                self.log.line(
                    f"finished at step {step}; model exported to {model_path}"
                )
            else:
                self.log.line(f"finished at step {step}; model export skipped")
        writer.close()
        val_writer.close()
        if norm_callback is not None:
            norm_callback.close()
        summary = {
            "status": status,
            "exit_status": EXIT_STATUS[status],
            "final_step": step,
            "total_steps": self.total_steps,
            "resumed_from_step": resumed_from,
            "metrics": metrics,
            "model_path": model_path,
            "checkpoint": last_checkpoint,
            "logdir": config.logdir,
            "data": {
                "source": train_set.source,
                "train_examples": len(train_set),
                "val_examples": len(val_set) if val_set is not None else 0,
                "vocab_size": train_set.vocab_size,
                "num_classes": train_set.num_classes,
            },
            "nan_report": nan_report,
            "elapsed_seconds": round(time.time() - started, 3),
            "runtime": _keras.describe(),
            "config": config.to_dict(),
        }
        self._write_summary(summary)
        return summary


def _sparse_ce(labels, logits):
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)


def _json_default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return str(value)

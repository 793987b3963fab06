"""What tfnorm's callbacks share: step bookkeeping and TensorBoard writing.

`PeriodicCallback` runs a callback's work every `every_n_steps` training
steps and at epoch end, and prepares it for its model once, when `fit`
starts, so that arguments only the model can check (probe data that does not
fit it, a missing loss) fail before training rather than in the middle of it.
`SummaryCallback` adds a validated `log_dir` and a `SummaryWriter`.
"""

from __future__ import annotations

import os

import numpy as np

from tfnorm._checks import check_positive_int
from tfnorm._keras import accept_tensor_logs, keras, tf


def validate_every_n_steps(every_n_steps):
    """`every_n_steps` as an int, or raises unless it is a positive int."""
    return check_positive_int("every_n_steps", every_n_steps)


def validate_log_dir(log_dir):
    """`log_dir` as a str, or raises unless it names a directory that exists
    or can be created and written to.

    Paths of remote file systems (`gs://...`) are checked by TensorFlow when
    the first event file is written.
    """
    path = log_dir
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path.strip():
        raise ValueError(
            "`log_dir` must be a non-empty directory path (str or "
            f"os.PathLike). Received: log_dir={log_dir!r}"
        )
    if "://" in path:
        return path
    existing = path
    while not os.path.exists(existing):
        existing = os.path.dirname(os.path.abspath(existing))
    if not os.path.isdir(existing):
        raise ValueError(
            f"`log_dir` must be a directory, but {existing!r} is a file. "
            f"Received: log_dir={log_dir!r}"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(
            f"`log_dir` must be writable, but {existing!r} is not. "
            f"Received: log_dir={log_dir!r}"
        )
    return path


def require_model(callback):
    """`callback.model`, or raises saying how to set it."""
    model = getattr(callback, "model", None)
    if model is None:
        raise ValueError(
            f"{type(callback).__name__} has no model: call `set_model(model)` "
            "before logging from a custom training loop."
        )
    return model


class PeriodicCallback(keras.callbacks.Callback):
    """Calls `self._periodic(step)` every `every_n_steps` steps and at epoch end.

    Steps count training batches across epochs, starting from the optimizer's
    iteration count when `fit` begins (so a resumed `fit` continues the
    numbering). The count is kept here rather than read from the optimizer
    each batch, which would wait for the device on every step.

    Subclasses build what they need for the model in `_prepare(model)`, which
    runs once per model: at `on_train_begin` (or after the first batch, for
    a model `fit` builds only then), or before the first record of a custom
    training loop.
    """

    def __init__(self, every_n_steps):
        super().__init__()
        self.every_n_steps = validate_every_n_steps(every_n_steps)
        self._step = 0
        self._epoch_start_step = 0
        self._last_step = None
        self._prepared = False
        # Our batch hooks need no NumPy logs, so Keras 2 need not convert
        # them (and wait for the device) on every batch.
        accept_tensor_logs(self)

    def set_model(self, model):
        # `fit` calls this on every call: keep what was built (traced probe
        # functions) unless the model really changes.
        if model is not getattr(self, "model", None):
            self._forget_model()
            self._prepared = False
        super().set_model(model)

    def _forget_model(self):
        """Drops what was built for the previous model."""

    def _prepare(self, model):
        """Builds what the callback needs for `model` and checks its
        arguments against it."""

    def _prepare_once(self):
        if not self._prepared:
            self._prepare(require_model(self))
            self._prepared = True

    def on_train_begin(self, logs=None):
        optimizer = getattr(self.model, "optimizer", None)
        iterations = getattr(optimizer, "iterations", None)
        self.begin_at(0 if iterations is None else int(np.asarray(iterations.numpy())))

    def begin_at(self, step):
        """Starts the step count at `step`, as `fit` does from the optimizer.

        For custom training loops, whose model has no compiled optimizer to
        read: a loop resuming at step 300 calls `begin_at(300)`, then the
        usual `on_train_batch_end(batch)` / `on_epoch_*` hooks.
        """
        self._step = self._epoch_start_step = int(step)
        self._last_step = None
        if self.model.built:
            self._prepare_once()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start_step = self._step

    def on_train_batch_end(self, batch, logs=None):
        if self._advance(batch):
            self._run_once(self._step)

    def _advance(self, batch):
        """Updates the step count; True when a multiple of `every_n_steps` passed."""
        self._prepare_once()
        previous = self._step
        # `batch` is the last batch index run (several with steps_per_execution).
        self._step = self._epoch_start_step + int(batch) + 1
        return self._step // self.every_n_steps > previous // self.every_n_steps

    def on_epoch_end(self, epoch, logs=None):
        self._run_once(self._step)

    def _run_once(self, step):
        if step != self._last_step:
            self._last_step = step
            self._periodic(step)

    def _periodic(self, step):
        raise NotImplementedError


class SummaryCallback(PeriodicCallback):
    """A periodic callback that writes TensorBoard summaries to `log_dir`.

    Subclasses implement `log(step)`, which writes through `self.writer`.
    """

    def __init__(self, log_dir, every_n_steps, buckets=30):
        super().__init__(every_n_steps)
        self.log_dir = validate_log_dir(log_dir)
        self.writer = SummaryWriter(self.log_dir, buckets=buckets)

    def log(self, step):
        raise NotImplementedError

    def _periodic(self, step):
        self.log(step)

    def on_train_end(self, logs=None):
        self.writer.flush()

    def close(self):
        """Closes the event file (a later `log` opens a new one)."""
        self.writer.close()


class SummaryWriter:
    """Writes histograms and scalars to `log_dir` from one traced function.

    Eager `tf.summary` calls cost milliseconds each; a model with dozens of
    norms writes hundreds of summaries per record, so they are written from
    a `tf.function` (traced again only when the set of tags changes). The
    event file is created at the first write.
    """

    def __init__(self, log_dir, buckets=30):
        self.log_dir = str(log_dir)
        self.buckets = buckets
        self._writer = None
        self._function = None

    @property
    def is_open(self):
        """Whether an event file is open (something was written since `close`)."""
        return self._writer is not None

    def write(self, step, histograms=None, scalars=None):
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.log_dir)
            # A new writer is a new resource: the function must capture it.
            self._function = tf.function(self._write, reduce_retracing=True)
        histograms = {
            tag: tf.convert_to_tensor(values, tf.float32)
            for tag, values in (histograms or {}).items()
        }
        scalars = {
            tag: tf.constant(value, tf.float32)
            for tag, value in (scalars or {}).items()
        }
        with self._writer.as_default():
            self._function(tf.constant(int(step), tf.int64), histograms, scalars)
        self._writer.flush()

    def _write(self, step, histograms, scalars):
        for tag, values in histograms.items():
            tf.summary.histogram(tag, values, step=step, buckets=self.buckets)
        for tag, value in scalars.items():
            tf.summary.scalar(tag, value, step=step)

    def flush(self):
        if self._writer is not None:
            self._writer.flush()

    def close(self):
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self._function = None

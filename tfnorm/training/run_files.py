"""The files a run keeps besides checkpoints, and what they must agree on.

* `checkpoint_dir/run_config.json`: the settings and the run's identity
  (SHA-256 of the training file, vocabulary size, class count), so that a
  rerun resumes only the run it belongs to;
* `checkpoint_dir/vocabulary.json` and `labels.json` (and copies in
  `logdir`, beside the exported model, where `tfnorm predict` reads them):
  the token ids and the class names of a text run, reused and checked only
  together with a checkpoint of the same run;
* `logdir/summary.json`: how the run ended, written on every exit path;
* the exported model;
* the progress log file (`log_file`), opened only once the settings and the
  data are known to be good, so a rejected run leaves nothing behind.

Identity matters because a vocabulary applied to other data turns every
token into `[UNK]` without any error.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os

import numpy as np

from tfnorm import _keras
from tfnorm.training.config import RESUME_KEYS, ConfigError
from tfnorm.training.data.labels import load_label_names, save_label_names
from tfnorm.training.data.vocabulary import (
    VOCABULARY_FILE,
    load_vocabulary,
    save_vocabulary,
)

#: A run's `status` (in `summary.json` and the dict `train` returns) and the
#: exit status `tfnorm train` gives it; `summary.json` repeats it as
#: `exit_status` for scripts. Bad settings, data or a locked checkpoint
#: directory raise before a run starts; the CLI exits 2 for those.
EXIT_STATUS = {
    "completed": 0,
    "nan": 3,  # stopped on a non-finite loss/weights; last good checkpoint kept
    "failed": 74,  # an output could not be written (disk full); EX_IOERR
    "interrupted": 130,  # SIGINT, as a shell reports 128 + 2
    "terminated": 143,  # SIGTERM, as a shell reports 128 + 15
}

RUN_CONFIG_FILE = "run_config.json"
SUMMARY_FILE = "summary.json"
IDENTITY_KEY = "run_identity"


def file_sha256(path):
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_run_config(checkpoint_dir):
    """The saved `run_config.json` as a dict, or None when there is none."""
    path = os.path.join(checkpoint_dir, RUN_CONFIG_FILE)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            saved = json.load(handle)
    except (OSError, ValueError) as error:
        raise ConfigError(
            "checkpoint_dir",
            f"{path} cannot be read ({error}); it says which run the "
            "checkpoints belong to. Restore or remove it. Received: "
            f"checkpoint_dir={checkpoint_dir!r}",
        ) from None
    return saved if isinstance(saved, dict) else {}


def write_run_config(config, identity):
    """Writes the settings and `identity` to `checkpoint_dir/run_config.json`."""
    values = dict(config.to_dict(), **{IDENTITY_KEY: identity})
    _atomic_json(os.path.join(config.checkpoint_dir, RUN_CONFIG_FILE), values)


def check_same_run(config, saved, data_sha256):
    """Refuses to resume checkpoints of a run with other settings or data.

    Args:
        config: the resolved `TrainConfig` of this run.
        saved: the saved run config (from `read_run_config`).
        data_sha256: the training file's hash now (None for synthetic data).

    Raises:
        ConfigError: naming the differing settings, or the changed file.
    """
    current = config.to_dict()
    differences = [
        f"{key}: checkpoint {saved.get(key)!r}, now {current[key]!r}"
        for key in RESUME_KEYS
        if key in saved and saved.get(key) != current[key]
    ]
    if differences:
        raise ConfigError(
            "checkpoint_dir",
            f"{config.checkpoint_dir} holds checkpoints of a run with other "
            f"settings ({'; '.join(differences)}). Use another checkpoint_dir "
            "(--checkpoint-dir) or the original settings. Received: "
            f"checkpoint_dir={config.checkpoint_dir!r}",
        )
    saved_sha = (saved.get(IDENTITY_KEY) or {}).get("data_sha256")
    if data_sha256 and saved_sha and saved_sha != data_sha256:
        raise ConfigError(
            "data",
            f"{config.data} changed since the checkpoints in "
            f"{config.checkpoint_dir} were made (SHA-256 {saved_sha[:12]}... "
            f"then, {data_sha256[:12]}... now); resuming would train on other "
            "data with the old vocabulary. Restore the file, or start a new "
            f"run with another --checkpoint-dir. Received: data={config.data!r}",
        )


def saved_vocabulary(checkpoint_dir, has_checkpoint):
    """The vocabulary to reuse: the saved one if it goes with a checkpoint.

    Returns:
        `(vocabulary or None, note or None)`; the note says why a saved
        vocabulary was ignored.
    """
    vocabulary = load_vocabulary(checkpoint_dir)
    if vocabulary is None or has_checkpoint:
        return vocabulary, None
    return None, (
        f"ignoring {os.path.join(checkpoint_dir, VOCABULARY_FILE)}: no "
        "checkpoint goes with it, so a fresh vocabulary is built from the data"
    )


def saved_label_names(checkpoint_dir, has_checkpoint):
    """The class names the checkpoints were trained with, or None.

    Like the vocabulary, they only count together with a checkpoint.
    """
    return load_label_names(checkpoint_dir) if has_checkpoint else None


def save_vocabularies(vocabulary, config, label_names=None):
    """Saves a text run's vocabulary and class names with its checkpoints and
    in `logdir` (beside the exported model)."""
    for directory in (config.checkpoint_dir, config.logdir):
        save_vocabulary(vocabulary, directory)
        if label_names is not None:
            save_label_names(label_names, directory)


def summary(
    result,
    config,
    *,
    total_steps,
    metrics,
    checkpoint,
    resumed,
    data,
    model_path,
    seconds,
):
    """The `summary.json` of a run that ended as `result` (a `LoopResult`).

    The same keys on every exit path, so scripts can read any summary.
    """
    reason = result.stop.reason if result.stop else None
    return {
        "status": result.status,
        "exit_status": EXIT_STATUS[result.status],
        "final_step": result.step,
        "total_steps": total_steps,
        "resumed_from_step": result.start_step,
        "resumed_from_checkpoint": resumed.checkpoint,
        "skipped_checkpoints": resumed.skipped,
        "metrics": metrics,
        "model_path": model_path,
        "checkpoint": checkpoint,
        "logdir": config.logdir,
        "data": data,
        "nan_report": reason if result.status == "nan" else None,
        "error": reason if result.status == "failed" else None,
        "elapsed_seconds": round(seconds, 3),
        "runtime": _keras.describe(),
        "config": config.to_dict(),
    }


def data_summary(train_set, val_set, sha256):
    """The `data` entry of `summary.json`.

    Text files add what loading found (`Dataset.report`): `label_names`,
    `val_split` (None with a validation file) and `truncation` (texts cut
    by `max_len`, and the `max_len_95` that keeps 95% whole).
    """
    return {
        "source": train_set.source,
        "train_examples": len(train_set),
        "val_source": val_set.source if val_set is not None else None,
        "val_examples": len(val_set) if val_set is not None else 0,
        "vocab_size": train_set.vocab_size,
        "num_classes": train_set.num_classes,
        "sha256": sha256,
        **train_set.report,
    }


def write_summary(logdir, summary):
    """Writes `logdir/summary.json` atomically; returns its path."""
    path = os.path.join(logdir, SUMMARY_FILE)
    _atomic_json(path, summary)
    return path


def export_model(model, logdir):
    """Saves `model` in the runtime's native format under `logdir/model`."""
    return _keras.save_model(model, os.path.join(logdir, "model"))


class ProgressLog:
    """Writes progress to a stream and the log file, line by line.

    A log file or a pipe gets one complete line per report so that
    `tail -f` and `nohup` show progress as it happens; a terminal gets a
    progress bar redrawn in place, with the same lines printed above it.
    Lines logged before `open_file` are written to the file when it opens.
    """

    def __init__(self, stream, log_file=None):
        self.stream = stream
        self.is_tty = bool(getattr(stream, "isatty", lambda: False)())
        self.log_file = log_file
        self.file = None
        self._pending = []
        self._bar_shown = False

    def open_file(self):
        """Creates the log file's directory and opens it for appending."""
        if not self.log_file or self.file is not None:
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.log_file)), exist_ok=True)
        self.file = open(self.log_file, "a", buffering=1, encoding="utf-8")
        for line in self._pending:
            self.file.write(line + "\n")
        self._pending = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._clear_bar()
        if self.file:
            self.file.close()
            self.file = None

    def line(self, text):
        stamped = f"[{datetime.datetime.now().strftime('%H:%M:%S')}] {text}"
        self._clear_bar()
        self.stream.write(stamped + "\n")
        self.stream.flush()
        if self.file:
            self._write_file(stamped)
        elif self.log_file:
            self._pending.append(stamped)

    def _write_file(self, text):
        try:
            self.file.write(text + "\n")
        except OSError as error:
            # A full disk must not end the run from the log; say it once.
            self.file = None
            self.stream.write(f"log file {self.log_file} no longer written: {error}\n")

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


def _atomic_json(path, values):
    text = json.dumps(values, indent=2, default=_json_default) + "\n"
    atomic_write_text(path, text)


def atomic_write_text(path, text):
    """Writes `text` to `path` through a temporary file and a rename, so a
    reader (or a rerun after `kill -9`) sees the old file or the new one,
    never half of one. A failed write leaves no temporary file behind."""
    temporary = f"{path}.tmp{os.getpid()}"
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def _json_default(value):
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return str(value)

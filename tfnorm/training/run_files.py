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
from tfnorm.training.config_checks import _FILE_VOCAB as FILE_VOCAB
from tfnorm.training.data.labels import load_label_names, save_label_names
from tfnorm.training.data.vocabulary import (
    VOCABULARY_FILE,
    load_vocabulary,
    save_vocabulary,
)
from tfnorm.training.files import atomic_write_text, open_in_place, refuse_links

#: A run's `status` (in `summary.json` and the dict `train` returns) and the
#: exit status `tfnorm train` gives it; `summary.json` repeats it as
#: `exit_status` for scripts. Bad settings, data or a locked checkpoint
#: directory raise before a run starts; the CLI exits 2 for those.
EXIT_STATUS = {
    "completed": 0,
    "nan": 3,  # stopped on a non-finite loss/weights; last good checkpoint kept
    # an output could not be written (disk full), or memory ran out mid-run
    "failed": 74,  # EX_IOERR
    "interrupted": 130,  # SIGINT, as a shell reports 128 + 2
    "terminated": 143,  # SIGTERM, as a shell reports 128 + 15
    "hangup": 129,  # SIGHUP (terminal closed, no nohup), as a shell reports 128 + 1
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
    try:
        refuse_links([path])
    except OSError as error:
        raise ConfigError(
            "checkpoint_dir", f"{error}. Received: checkpoint_dir={checkpoint_dir!r}"
        ) from None
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
    if not isinstance(saved, dict):
        # An earlier release could leave `[]`; read as "no settings", it let
        # any run resume these checkpoints unchecked.
        raise ConfigError(
            "checkpoint_dir",
            f"{path} holds a JSON {type(saved).__name__}, not the mapping of "
            "settings that says which run the checkpoints belong to; restore "
            "it, or use another --checkpoint-dir to start a new run. Received: "
            f"checkpoint_dir={checkpoint_dir!r}",
        )
    return saved


def write_run_config(paths, config, identity):
    """Writes the settings and `identity` to `run_config.json` in the run's
    checkpoint directory (`paths`, a `RunPaths`)."""
    values = dict(config.to_dict(), **{IDENTITY_KEY: identity})
    _atomic_json(os.path.join(paths.checkpoint_dir, RUN_CONFIG_FILE), values)


#: Settings that may change on resume (the rest, `RESUME_KEYS`, may not);
#: a change is logged, so a resumed run's log says what it trains with.
CHANGEABLE_KEYS = (
    "epsilon",
    "dropout_rate",
    "learning_rate",
    "warmup_steps",
    "decay",
    "weight_decay",
    "clipnorm",
    "epochs",
    "steps_per_epoch",
    "val_data",
)


def check_same_run(config, saved, data_sha256, log=None):
    """Refuses to resume checkpoints of a run with other settings or data.

    Values are compared as resolved: `./A.csv` is `A.csv`, a norm alias is
    its class, and a default given explicitly (`--vocab-size 20000` with a
    file) equals the default left out. The data path is not compared when
    the recorded SHA-256 of the file matches: the file is the same, however
    it is spelled.

    Args:
        config: the resolved `TrainConfig` of this run.
        saved: the saved run config (from `read_run_config`), or None when
            checkpoints have no `run_config.json` beside them.
        data_sha256: the training file's hash now (None for synthetic data).
        log: a `ProgressLog` for the one line naming the settings that
            changed and may (`CHANGEABLE_KEYS`); None logs nothing.

    Raises:
        ConfigError: naming the differing settings, or the changed file, or
            a text-data run whose checkpoints record no hash of their data.
    """
    saved = saved or {}
    current = config.to_dict()
    identity = saved.get(IDENTITY_KEY)
    identity = identity if isinstance(identity, dict) else {}
    saved_sha = identity.get("data_sha256")
    same_file = bool(data_sha256 and saved_sha == data_sha256)
    differences = [
        f"{key}: checkpoint {saved.get(key)!r}, now {current[key]!r}"
        for key in RESUME_KEYS
        if key in saved
        and not (key == "data" and same_file)
        and _resolved(key, saved.get(key), saved, identity)
        != _resolved(key, current[key], current, identity)
    ]
    if differences:
        raise ConfigError(
            "checkpoint_dir",
            f"{config.checkpoint_dir} holds checkpoints of a run with other "
            f"settings ({'; '.join(differences)}). Use another checkpoint_dir "
            "(--checkpoint-dir) or the original settings. Received: "
            f"checkpoint_dir={config.checkpoint_dir!r}",
        )
    if data_sha256 and saved_sha and saved_sha != data_sha256:
        raise ConfigError(
            "data",
            f"{config.data} changed since the checkpoints in "
            f"{config.checkpoint_dir} were made (SHA-256 {saved_sha[:12]}... "
            f"then, {data_sha256[:12]}... now); resuming would train on other "
            "data with the old vocabulary. Restore the file, or start a new "
            f"run with another --checkpoint-dir. Received: data={config.data!r}",
        )
    if config.data and data_sha256 and not saved_sha:
        # Checkpoints of an earlier release (or without run_config.json): the
        # file they were trained on is unknown, and another file would be
        # read through their vocabulary as unknown tokens, without an error.
        path = os.path.join(config.checkpoint_dir, RUN_CONFIG_FILE)
        raise ConfigError(
            "data",
            f"the checkpoints in {config.checkpoint_dir} record no SHA-256 of "
            f"their training file ({path} has no {IDENTITY_KEY}), so it cannot "
            f"be confirmed that {config.data} is the file they were trained on. "
            "Start a new run with another --checkpoint-dir; or, only if the "
            "file is unchanged since, add "
            f'"{IDENTITY_KEY}": {{"data_sha256": "{data_sha256}"}} to {path} and '
            f"rerun. Received: data={config.data!r}",
        )
    changed = [
        f"{key} {saved[key]!r} -> {current[key]!r}"
        for key in CHANGEABLE_KEYS
        if key in saved and saved[key] != current[key]
    ]
    if changed and log is not None:
        log.line(
            f"resuming with changed settings: {', '.join(changed)} (the "
            "checkpoint's weights are kept; these apply from here on)"
        )


def _resolved(key, value, values, identity):
    """`value` of `key` as the run uses it, for comparing two spellings."""
    if key == "data" and isinstance(value, str):
        return os.path.normpath(os.path.abspath(value))
    if key in ("model_fn", "data_fn") and isinstance(value, str):
        path, colon, function = value.rpartition(":")
        if path.endswith(".py"):  # else a module name, spelled one way
            return os.path.normpath(os.path.abspath(path)) + colon + function
    if key == "norm" and isinstance(value, str):
        from tfnorm.layers.factory import norm_from_spec

        try:
            return type(norm_from_spec(value, "norm")).__name__
        except ValueError:
            return value
    if key == "vocab_size" and value is None:
        if values.get("data"):
            return FILE_VOCAB
        if values.get("task"):
            return max(16, 2 * values["max_len"] + 1)
    if key == "num_classes" and value is None and values.get("data"):
        # Inferred from the labels: what they gave is recorded in the identity.
        return identity.get("num_classes", value)
    return value


def saved_vocabulary(checkpoint_dir, has_checkpoint):
    """The vocabulary to reuse: the saved one if it goes with a checkpoint.

    Returns:
        `(vocabulary or None, note or None)`; the note says why a saved
        vocabulary was ignored.

    Raises:
        ConfigError: the saved vocabulary is damaged or a link, and a
            checkpoint goes with it (without one it is ignored, as above).
    """
    try:
        vocabulary = load_vocabulary(checkpoint_dir)
    except ValueError as error:
        if not has_checkpoint:
            return None, f"ignoring {error}; no checkpoint goes with it"
        raise ConfigError(
            "checkpoint_dir",
            f"{error}. It holds the token ids of the checkpoints beside it: "
            "restore it, or move the directory away to start over. Received: "
            f"checkpoint_dir={checkpoint_dir!r}",
        ) from None
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


def save_vocabularies(vocabulary, paths, label_names=None):
    """Saves a text run's vocabulary and class names with its checkpoints and
    in its logdir (beside the exported model); `paths` is its `RunPaths`."""
    for directory in (paths.checkpoint_dir, paths.logdir):
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
    export=None,
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
        # {"kind": "model" or "weights", "path", "load", "reason"}, or None
        "export": export,
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


def write_summary(paths, summary):
    """Writes `summary.json` in the run's logdir (`paths`, a `RunPaths`)
    atomically; returns its path."""
    path = os.path.join(paths.logdir, SUMMARY_FILE)
    _atomic_json(path, summary)
    return path


def export_model(model, logdir, probe_inputs=None, rebuild=None):
    """Exports `model` to `logdir`, checked by loading it back; returns an
    `export.Export` (see `tfnorm.training.export.export_model`)."""
    from tfnorm.training import export

    return export.export_model(model, logdir, probe_inputs, rebuild)


class ProgressLog:
    """Writes progress to a stream and the log file, line by line.

    A log file or a pipe gets one complete line per report so that
    `tail -f` and `nohup` show progress as it happens; a terminal gets a
    progress bar redrawn in place, with the same lines printed above it.
    Lines logged before `open_file` are written to the file when it opens.

    A stream that stops taking writes (`tfnorm train ... | head -2` once
    head exits: EPIPE; a closed terminal: EIO) is dropped with a note in the
    log file, and the run goes on writing the log file only: losing the
    screen must not lose the run. Its file descriptor is pointed at
    /dev/null, so that Python's own flush at exit finds nothing to complain
    about.
    """

    def __init__(self, stream, log_file=None):
        self.stream = stream
        self.is_tty = bool(getattr(stream, "isatty", lambda: False)())
        self.log_file = log_file
        self.file = None
        self._pending = []
        self._bar_shown = False

    def open_file(self):
        """Creates the log file's directory and opens it for appending.

        Raises:
            UnsafeFileError: the log file is a link or not a regular file
                (see `tfnorm.training.files`); nothing is written to it.
        """
        if not self.log_file or self.file is not None:
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.log_file)), exist_ok=True)
        descriptor = open_in_place(
            self.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT
        )
        self.file = os.fdopen(descriptor, "a", buffering=1, encoding="utf-8")
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
        self._to_file(stamped)
        self._write_stream(stamped + "\n")

    def _to_file(self, stamped):
        if self.file:
            self._write_file(stamped)
        elif self.log_file:
            self._pending.append(stamped)

    def _write_stream(self, text):
        if self.stream is None:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError) as error:  # ValueError: a closed file
            self._drop_stream(error)

    def _drop_stream(self, error):
        stream, self.stream = self.stream, None
        self._bar_shown = False
        try:
            descriptor = stream.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, descriptor)
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass  # not a real file (a notebook's stream): nothing flushes it later
        where = "the log file only" if self.log_file else "summary.json only"
        reason = getattr(error, "strerror", None) or error
        self._to_file(
            f"[{datetime.datetime.now().strftime('%H:%M:%S')}] stdout closed "
            f"({reason}); the run goes on, progress in {where}"
        )

    def _write_file(self, text):
        try:
            self.file.write(text + "\n")
        except OSError as error:
            # A full disk must not end the run from the log; say it once.
            self.file = None
            self._write_stream(f"log file {self.log_file} no longer written: {error}\n")

    def bar(self, step, total, text):
        if not self.is_tty or self.stream is None:
            return
        width = 24
        filled = int(width * step / max(total, 1))
        self._write_stream(f"\r[{'#' * filled}{'.' * (width - filled)}] {text}\x1b[K")
        self._bar_shown = self.stream is not None

    def _clear_bar(self):
        if self._bar_shown:
            self._bar_shown = False
            self._write_stream("\r\x1b[K")


def _atomic_json(path, values):
    text = json.dumps(values, indent=2, default=_json_default) + "\n"
    atomic_write_text(path, text)


def _json_default(value):
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return str(value)

"""What a run leaves behind besides checkpoints.

* `logdir/summary.json`: how the run ended, written on every exit path,
  with the exit status `tfnorm train` gives it;
* the exported model;
* `checkpoint_dir/vocabulary.json` and `labels.json` (and copies in
  `logdir`, beside the exported model, where `tfnorm predict` reads them):
  the token ids and the class names of a text run, reused and checked only
  together with a checkpoint of the same run.
"""

from __future__ import annotations

import os

from tfnorm import _keras
from tfnorm._safe_io import atomic_write_json
from tfnorm.settings.config_error import ConfigError
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
    # an output could not be written (disk full), or memory ran out mid-run
    "failed": 74,  # EX_IOERR
    # data met mid-run that no step can take (a label out of range), the
    # steps before it kept: the 2 of bad data found before the start
    "bad_data": 2,
    "interrupted": 130,  # SIGINT, as a shell reports 128 + 2
    "terminated": 143,  # SIGTERM, as a shell reports 128 + 15
    "hangup": 129,  # SIGHUP (terminal closed, no nohup), as a shell reports 128 + 1
}

SUMMARY_FILE = "summary.json"


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
    best_checkpoint=None,
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
        # {"kind": "model" or "weights", "path", "load", "reason", "sha256"}, or None
        "export": export,
        "checkpoint": checkpoint,
        # With keep_best: {"step", "val_loss", "checkpoint"} of the best one.
        "best_checkpoint": best_checkpoint,
        "logdir": config.logdir,
        "data": data,
        "nan_report": reason if result.status == "nan" else None,
        "error": reason if result.status in ("failed", "bad_data") else None,
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
    atomic_write_json(path, summary)
    return path

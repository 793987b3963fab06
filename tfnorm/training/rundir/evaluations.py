"""What a run's evaluations leave beside its checkpoints: the last one's
step and metrics, and the best checkpoint by validation loss.

A checkpoint due at an evaluation's step is written before the evaluation
runs (`loop.actions`), so a kill during the evaluation leaves a checkpoint
of that step and no evaluation of it: the resumed run starts after that
step and would never evaluate it. `EVALUATION_FILE` (written after each
evaluation, atomically) says which step was evaluated last, so a resumed
run redoes the evaluation of its starting step when the file does not
reach it; it also holds the best validation loss so far, so that
`--keep-best` goes on comparing with it after a resume.

The best checkpoint is kept in `CHECKPOINT_DIR/best` (a checkpoint
directory of its own, with its state file, so `tf.train.latest_checkpoint`
finds it), never pruned by the run's own `keep_checkpoints`.
"""

from __future__ import annotations

import glob
import json
import os
import shutil

from tfnorm._safe_io import atomic_write_json
from tfnorm.training.rundir import checkpoints

#: The record of the last evaluation, in the checkpoint directory.
EVALUATION_FILE = "evaluation.json"
#: The directory of the best checkpoint, in the checkpoint directory.
BEST_DIR = "best"


class EvaluationRecord:
    """`EVALUATION_FILE` of a checkpoint directory: read by every worker,
    written by the chief only (`write=False` elsewhere).

    Its content is `{"step": int, "metrics": {...}, "best": {"step",
    "val_loss", "checkpoint"} or None}`.
    """

    def __init__(self, checkpoint_dir, write=True):
        self.path = os.path.join(checkpoint_dir, EVALUATION_FILE)
        self.writes = write

    def read(self):
        """The last record, or {} (none yet, or unreadable: then every
        evaluation counts as not done, which only redoes one)."""
        if self.writes:
            for leftover in glob.glob(glob.escape(self.path) + ".tmp*"):
                os.remove(leftover)
        try:
            with open(self.path, encoding="utf-8") as handle:
                saved = json.load(handle)
        except (OSError, ValueError):
            return {}
        return saved if isinstance(saved, dict) else {}

    def write(self, step, metrics, best):
        if self.writes:
            atomic_write_json(
                self.path, {"step": int(step), "metrics": metrics, "best": best}
            )


class BestCheckpoint:
    """Writes the run's checkpoint to `CHECKPOINT_DIR/best` when an
    evaluation beats the best validation loss so far; keeps that one only.

    With `scratch=True` (a non-chief worker, which must take part in every
    save of mirrored variables) the files are deleted again.
    """

    def __init__(self, checkpoint, checkpoint_dir, scratch=False):
        directory = os.path.join(checkpoint_dir, BEST_DIR)
        if not scratch:  # a save a kill interrupted
            checkpoints.remove_partial_writes(directory)
        known = checkpoints.read_state_file(directory) or []
        self.writer = checkpoints.CheckpointWriter(checkpoint, directory, 1, known)
        self.scratch = scratch

    def save(self, step):
        """Writes the checkpoint of `step`; returns its prefix (None for scratch)."""
        path = self.writer.save(step)
        if self.scratch:
            shutil.rmtree(self.writer.directory, ignore_errors=True)
            return None
        return path

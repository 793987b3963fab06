"""Cutting a run's TensorBoard event files back to the step it resumes from.

A resumed run replays the steps after its last checkpoint and writes their
scalars and histograms again; TensorBoard would show each of those steps
twice (its purge of "orphaned" events after a restart is not done by every
reader, and TensorFlow 2's writers have no `purge_step`). So before a run
writes events, every event file of the directory loses the summaries of the
steps the run will write again; the files are rewritten whole and swapped in
atomically (a kill midway leaves the old file, and a `.purging` scratch file
that the next purge removes). Events that are not summaries (the file's
version header) are kept.
"""

from __future__ import annotations

import glob
import os

from tfnorm._keras import tf

EVENT_FILES = "events.out.tfevents.*"
_SCRATCH = ".purging"


def purge_from(directory, first_step):
    """Drops every summary at `first_step` or later from the event files
    directly in `directory`; returns how many summaries were dropped."""
    if directory is None or not os.path.isdir(directory):
        return 0
    for leftover in glob.glob(os.path.join(directory, "*" + _SCRATCH)):
        os.remove(leftover)
    dropped = 0
    for path in sorted(glob.glob(os.path.join(directory, EVENT_FILES))):
        if os.path.isfile(path) and not os.path.islink(path):
            dropped += _purge_file(path, first_step)
    return dropped


def _purge_file(path, first_step):
    kept, dropped = [], 0
    for record in _records(path):
        event = tf.compat.v1.Event.FromString(record)
        if event.HasField("summary") and event.step >= first_step:
            dropped += 1
        else:
            kept.append(record)
    if dropped:
        scratch = path + _SCRATCH
        with tf.io.TFRecordWriter(scratch) as writer:
            for record in kept:
                writer.write(record)
        os.replace(scratch, path)
    return dropped


def _records(path):
    """The file's records up to the first damaged one (a write cut short by a
    kill leaves a partial last record)."""
    records = iter(tf.data.TFRecordDataset(path))
    while True:
        try:
            yield next(records).numpy()
        except (StopIteration, tf.errors.DataLossError, tf.errors.OutOfRangeError):
            return

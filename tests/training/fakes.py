"""Stand-ins for the run's log, checkpoint writer and model, for the action tests."""

from __future__ import annotations

import io

from tfnorm._keras import tf
from tfnorm.training.loop.actions import Cadence
from tfnorm.training.rundir.checkpoints import CheckpointWriteError
from tfnorm.training.rundir.progress_log import ProgressLog


class Log(ProgressLog):
    def __init__(self):
        super().__init__(io.StringIO())

    @property
    def text(self):
        return self.stream.getvalue()


class FakeWriter:
    """Stands in for a CheckpointWriter; records saves in `events`."""

    def __init__(self, events, directory="/nonexistent", fail_at=None):
        self.events, self.directory, self.fail_at = events, directory, fail_at

    def save(self, step):
        if step == self.fail_at:
            raise CheckpointWriteError(f"could not write checkpoint ckpt-{step}")
        self.events.append(("save", step))
        return f"ckpt-{step}"


class FakeModel:
    def __init__(self, value=1.0):
        self.weights = [tf.Variable([value, 2.0]), tf.Variable([3], dtype=tf.int32)]


def ones(step):
    return {"loss": 0.5, "correct": 4.0}


CADENCE = Cadence(steps_per_epoch=6, total_steps=12, checkpoint_every=4)

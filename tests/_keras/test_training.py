"""tfnorm/_keras/training.py: optimizers in custom training loops, either Keras."""

from __future__ import annotations

import numpy as np

from tfnorm import _keras
from tfnorm._keras import keras, tf


def test_a_trackable_optimizer_is_checkpointed_as_it_is():
    optimizer = keras.optimizers.Adam(1e-3)
    assert _keras.checkpointable_optimizer(optimizer) is optimizer


class _UntrackableOptimizer:
    """What Keras 3.0's optimizers are to `tf.train.Checkpoint`: state in
    `variables`, but no Trackable base class."""

    def __init__(self):
        self.variables = [
            tf.Variable(0, dtype=tf.int64, name="iteration"),
            tf.Variable(np.zeros(3, "float32"), name="momentum"),
        ]


def test_an_untrackable_optimizer_saves_and_restores_its_variables(tmp_path):
    saved = _UntrackableOptimizer()
    saved.variables[0].assign(7)
    saved.variables[1].assign([1.0, 2.0, 3.0])
    path = tf.train.Checkpoint(optimizer=_keras.checkpointable_optimizer(saved)).save(
        str(tmp_path / "ckpt")
    )

    restored = _UntrackableOptimizer()
    tf.train.Checkpoint(optimizer=_keras.checkpointable_optimizer(restored)).restore(
        path
    ).assert_existing_objects_matched()
    assert int(restored.variables[0].numpy()) == 7
    np.testing.assert_array_equal(restored.variables[1].numpy(), [1.0, 2.0, 3.0])

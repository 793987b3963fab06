"""Deterministic ops for a while, then the process's own setting again."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def deterministic_ops():
    """TensorFlow's deterministic ops inside the block only.

    `tf.config.experimental.enable_op_determinism` is process-wide and
    public TensorFlow (2.9 to 2.21) has no way back: left on after an
    experiment, it makes the user's later unseeded random ops raise and
    changes which kernel reports a bad label. Reading and restoring the
    setting takes TensorFlow's private config module.
    """
    from tensorflow.python.framework import config

    was_enabled = config.is_op_determinism_enabled()
    config.enable_op_determinism()
    try:
        yield
    finally:
        if not was_enabled:
            config.disable_op_determinism()


def op_determinism_enabled():
    """Whether TensorFlow's deterministic ops are on in this process."""
    from tensorflow.python.framework import config

    return config.is_op_determinism_enabled()

"""The tasks of `tfnorm compare`, `tfnorm.experiments.tasks`."""

from __future__ import annotations

import numpy as np

from tfnorm.experiments.tasks import reverse_task


def test_reverse_task_targets_are_the_reversed_inputs():
    tokens, targets = reverse_task(np.random.default_rng(0), 50, 7, 4)
    assert tokens.shape == targets.shape == (50, 7)
    np.testing.assert_array_equal(targets, tokens[:, ::-1])
    assert tokens.min() >= 0 and tokens.max() <= 3
    again, _ = reverse_task(np.random.default_rng(0), 50, 7, 4)
    np.testing.assert_array_equal(again, tokens)

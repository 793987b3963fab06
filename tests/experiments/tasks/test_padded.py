"""The padded, variable-length reverse task, `tfnorm.experiments.tasks.padded`."""

from __future__ import annotations

import numpy as np

from tfnorm.experiments.tasks.padded import (
    PAD_ID,
    PaddedReverseTask,
    padded_reverse_task,
)


def test_each_sequence_reverses_its_real_part_and_pads_the_rest():
    tokens, targets, weights = padded_reverse_task(np.random.default_rng(0), 200, 7, 4)
    assert tokens.shape == targets.shape == weights.shape == (200, 7)
    lengths = weights.sum(axis=1).astype(int)
    assert set(lengths) == set(range(1, 8))  # every length 1..7 occurs
    for row, length in enumerate(lengths):
        real = tokens[row, :length]
        assert 1 <= real.min() and real.max() <= 4
        np.testing.assert_array_equal(targets[row, :length], real[::-1])
        assert (tokens[row, length:] == PAD_ID).all()
        assert (weights[row, length:] == 0).all() and (weights[row, :length] == 1).all()


def test_the_task_adds_the_padding_token_to_the_vocabulary():
    task = PaddedReverseTask(vocab_size=5, seq_len=6, eval_size=32)
    assert task.vocab_size == 6 and task.chance == 1 / 5 and task.pad_id == PAD_ID
    tokens, _, weights = task.batch(np.random.default_rng(1), 8)
    assert tokens.shape == (8, 6) and tokens.max() <= 5
    assert 0 < task.sizes["eval_padding_fraction"] < 1
    again = PaddedReverseTask(vocab_size=5, seq_len=6, eval_size=32)
    np.testing.assert_array_equal(again.eval_data[0], task.eval_data[0])

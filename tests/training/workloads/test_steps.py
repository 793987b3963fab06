"""`tfnorm.training.workloads.steps`: batch order, evaluation batches, the step function."""

from __future__ import annotations

import numpy as np

from tfnorm.training.data import Dataset
from tfnorm.training.workloads import steps


def dataset(size):
    return Dataset(
        ids=np.arange(size * 2, dtype=np.int32).reshape(size, 2),
        labels=np.arange(size, dtype=np.int32) % 2,
        vocab_size=2 * size,
        num_classes=2,
        source="test",
    )


def take(stream, count):
    return [next(stream)[1].tolist() for _ in range(count)]


def test_batch_order_depends_only_on_the_seed_and_resumes_mid_stream():
    data = dataset(10)
    full = take(steps.batches(data, 4, seed=3), 6)
    assert full == take(steps.batches(data, 4, seed=3), 6)
    assert full != take(steps.batches(data, 4, seed=4), 6)
    # Starting at example 8 (after two batches) continues the same stream.
    assert take(steps.batches(data, 4, seed=3, start_example=8), 4) == full[2:]


def test_each_pass_visits_every_example_once():
    data = dataset(12)
    stream = steps.batches(data, 4, seed=0)
    ids = [row[0] for _ in range(3) for row in next(stream)[0].tolist()]
    assert sorted(ids) == list(range(0, 24, 2))


def test_evaluation_uses_the_training_batch_size():
    seen = []

    def eval_step(ids, labels):
        seen.append(int(ids.shape[0]))
        return float(ids.shape[0]), 1.0

    metrics = steps.evaluate(eval_step, dataset(10), batch_size=4)
    assert seen == [4, 4, 2]
    assert metrics == {"val_loss": 1.0, "val_accuracy": 0.3}

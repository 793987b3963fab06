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


def test_the_train_step_reports_a_float16_step_the_loss_scaling_skipped(mixed_policy):
    from tfnorm import _keras
    from tfnorm._keras import keras, tf

    mixed_policy("mixed_float16")
    ids = keras.Input((3,), dtype="int32")
    pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(6, 4)(ids))
    model = keras.Model(ids, keras.layers.Dense(2, name="logits")(pooled))
    optimizer = _keras.loss_scale_optimizer(keras.optimizers.Adam(1e-3))
    _keras.build_optimizer(optimizer, model.trainable_variables)
    strategy = tf.distribute.get_strategy()
    train_step = steps.make_train_step(model, optimizer, strategy, 2)
    batch = (tf.constant([[1, 1, 2], [3, 1, 1]]), tf.constant([0, 1]))
    kernel = model.get_layer("logits").kernel
    fine = kernel.numpy()
    # 1e5 is finite in float32 but overflows float16's range (65504) in
    # the forward pass: the gradients are not finite.
    kernel.assign(np.full(fine.shape, 1e5, "float32"))
    before = [w.numpy() for w in model.weights]
    loss, correct, applied = train_step(*batch)
    assert not bool(applied)
    assert steps.step_logs(loss, correct, applied, optimizer)["skipped"] == 1.0
    for old, weight in zip(before, model.weights):
        np.testing.assert_array_equal(weight.numpy(), old)
    kernel.assign(fine)
    loss, correct, applied = train_step(*batch)
    assert bool(applied) and np.isfinite(float(loss))
    assert steps.step_logs(loss, correct, applied, optimizer)["skipped"] == 0.0
    assert all(np.all(np.isfinite(w.numpy())) for w in model.weights)
    # A float32 run's logs are as they were: no loss scaling, nothing skipped.
    assert "skipped" not in steps.step_logs(
        loss, correct, applied, keras.optimizers.Adam(1e-3)
    )

"""Train and eval steps, the seeded batch order, evaluation.

tfnorm's classifier has its own compiled steps; a user's model (`--model-fn`)
runs its own `train_step`/`test_step` under the run's strategy, as `fit` and
`evaluate` would (`make_model_train_step`, `make_model_test_step`).

Kept apart from the loop so that a step is a plain function `run_loop` can
call, and so that the batch order (which resume depends on) is written once.
"""

from __future__ import annotations

import numpy as np

from tfnorm import _keras
from tfnorm._keras import tf


def sparse_cross_entropy(labels, logits):
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)


def correct_count(labels, logits):
    predicted = tf.argmax(logits, -1, output_type=tf.int32)
    return tf.reduce_sum(tf.cast(tf.equal(predicted, labels), tf.float32))


def make_train_step(model, optimizer, strategy, global_batch_size, jit_compile=False):
    """A compiled step: `(ids, labels) -> (summed loss, correct count, applied)`.

    `applied` is the optimizer's own decision (`_keras.apply_gradients_and_report`):
    under float16 loss scaling a step whose gradients are not finite is
    skipped (False), and nothing of it reaches a weight. Gradient clipping
    is the optimizer's (see `tfnorm.optim.optimizers`), which clips the
    gradient summed over the replicas on every runtime. With `jit_compile`,
    XLA compiles the whole step (one replica only: the optimizer's
    all-reduce across replicas cannot run inside XLA).
    """

    def replica_step(ids, labels):
        with tf.GradientTape() as tape:
            logits = tf.cast(model(ids, training=True), tf.float32)
            loss = tf.nn.compute_average_loss(
                sparse_cross_entropy(labels, logits),
                global_batch_size=global_batch_size,
            )
            scaled_loss = _keras.scale_loss(optimizer, loss)
        variables = model.trainable_variables
        gradients = tape.gradient(scaled_loss, variables)
        gradients = _keras.unscale_gradients(optimizer, gradients)
        # Embedding gradients arrive as IndexedSlices whose row count depends
        # on each replica's tokens; the all-reduce across replicas needs equal
        # shapes, and Keras 3's loss scaling misjudges them (see
        # `_keras.dense_gradients`), so they are made dense.
        applied, _, _ = _keras.apply_gradients_and_report(
            optimizer, gradients, variables
        )
        return loss, correct_count(labels, logits), tf.cast(applied, tf.int32)

    # No Python control flow depends on tensors here, and autograph's
    # conversion of the Keras call stack costs seconds per trace.
    @tf.function(autograph=False, jit_compile=bool(jit_compile) or None)
    def train_step(ids, labels):
        loss, correct, applied = strategy.run(replica_step, args=(ids, labels))
        return (
            strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None),
            strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None),
            # Every replica applies the same all-reduced step, or none does.
            strategy.reduce(tf.distribute.ReduceOp.SUM, applied, axis=None)
            == strategy.num_replicas_in_sync,
        )

    return train_step


def step_logs(loss, correct, applied, optimizer):
    """The logs of one of tfnorm's steps: `loss`, `correct` and, when the
    optimizer scales the loss (float16), `skipped` (1.0 for a step the loss
    scaling skipped, 0.0 otherwise: the progress line shows its mean, the
    share of skipped steps)."""
    logs = {"loss": float(loss), "correct": float(correct)}
    if _keras.is_loss_scaled(optimizer):
        logs["skipped"] = 0.0 if bool(applied) else 1.0
    return logs


def classifier_step_fn(setup, train_set, batch_size, seed, jit_compile=False):
    """The `step_fn` `run_loop` calls: one batch of the seeded order, one step.

    Continues the batch order where the restored `setup.examples_seen`
    says, and advances it and `setup.step` with every step, so a
    checkpoint written after step N resumes exactly at step N + 1.
    """
    train_step = make_train_step(
        setup.model, setup.optimizer, setup.strategy, batch_size, jit_compile
    )
    stream = batches(train_set, batch_size, seed, int(setup.examples_seen.numpy()))

    def step_fn(step):
        ids, labels = next(stream)
        loss, correct, applied = train_step(*to_replicas(setup.strategy, ids, labels))
        setup.step.assign(step)
        setup.examples_seen.assign_add(batch_size)
        return step_logs(loss, correct, applied, setup.optimizer)

    return step_fn


def make_eval_step(model, max_len):
    """A compiled step: `(ids, labels) -> (summed loss, correct count)`."""

    @tf.function(
        autograph=False,
        input_signature=[
            tf.TensorSpec([None, max_len], tf.int32),
            tf.TensorSpec([None], tf.int32),
        ],
    )
    def eval_step(ids, labels):
        logits = tf.cast(model(ids, training=False), tf.float32)
        return (
            tf.reduce_sum(sparse_cross_entropy(labels, logits)),
            correct_count(labels, logits),
        )

    return eval_step


def evaluate(eval_step, dataset, batch_size):
    """Mean loss and accuracy of `dataset`, in batches of `batch_size`.

    The training batch size, so a batch size lowered to fit memory is also
    what evaluation uses.
    """
    total_loss = total_correct = 0.0
    for start in range(0, len(dataset), batch_size):
        loss, correct = eval_step(
            tf.constant(dataset.ids[start : start + batch_size]),
            tf.constant(dataset.labels[start : start + batch_size]),
        )
        total_loss += float(loss)
        total_correct += float(correct)
    return {
        "val_loss": total_loss / len(dataset),
        "val_accuracy": total_correct / len(dataset),
    }


def to_replicas(strategy, *arrays):
    """Splits one global batch (NumPy arrays, nested freely) over the replicas.

    Returns the arrays as tensors, per replica where there are several.
    """
    if _is_one_local_replica(strategy):
        return tf.nest.map_structure(tf.constant, arrays)
    per_replica = tf.nest.flatten(arrays)[0].shape[0] // strategy.num_replicas_in_sync

    def value_fn(context):
        index = context.replica_id_in_sync_group
        part = slice(index * per_replica, (index + 1) * per_replica)
        return tf.nest.map_structure(lambda array: tf.constant(array[part]), arrays)

    return strategy.experimental_distribute_values_from_function(value_fn)


def _is_one_local_replica(strategy):
    """True when `strategy` runs one replica and talks to no other worker:
    its steps may take plain tensors and read their input inside the graph.
    A one-worker `MultiWorkerMirroredStrategy` still wants distributed values.
    """
    return strategy.num_replicas_in_sync == 1 and not isinstance(
        strategy, tf.distribute.MultiWorkerMirroredStrategy
    )


def batches(dataset, batch_size, seed, start_example=0):
    """Global batches `(ids, labels)` in an order fixed by `seed` alone.

    See `index_batches`; starting at `start_example` reproduces exactly the
    batches an uninterrupted run would have seen from there, which is what
    lets a resumed run end with the same weights.
    """
    for indices in index_batches(len(dataset), batch_size, seed, start_example):
        yield dataset.ids[indices], dataset.labels[indices]


def index_batches(size, batch_size, seed, start_example=0):
    """Lists of example indices, `batch_size` each, in an order fixed by `seed`.

    Pass `p` over the `size` examples visits them in permutation `p` (seeded
    by `seed` and `p`); the stream of passes is cut into batches.
    """
    pass_index, offset = divmod(int(start_example), size)
    order = _permutation(seed, pass_index, size)
    while True:
        indices = []
        while len(indices) < batch_size:
            take = order[offset : offset + batch_size - len(indices)]
            indices.extend(take.tolist())
            offset += len(take)
            if offset == size:
                pass_index, offset = pass_index + 1, 0
                order = _permutation(seed, pass_index, size)
        yield indices


def _permutation(seed, pass_index, size):
    mixed = (seed * 1000003 + pass_index * 7919 + 17) % (2**31 - 1)
    return np.random.RandomState(mixed).permutation(size)


# ------------------------------------------------------- the user's model


#: The parts of a batch `(x, y, sample_weight)`, as `nonfinite_parts_mask` counts them.
BATCH_PARTS = ("x", "y", "sample_weight")


def make_model_train_step(model, strategy):
    """A compiled step: batch (or iterator) -> `(logs, nonfinite)`: the
    model's metrics, as `fit` runs them, and `nonfinite_parts_mask` of the
    batch (summed over the replicas' shares), so a NaN loss can be traced to
    the data."""

    def train_step(data):
        return model.train_step(data)

    if _keras.model_jit_compile(model):
        train_step = tf.function(train_step, jit_compile=True)

    def replica_step(data):
        return train_step(data), nonfinite_parts_mask(data)

    def gathered(outputs):
        logs, nonfinite = outputs
        nonfinite = strategy.reduce(tf.distribute.ReduceOp.SUM, nonfinite, axis=None)
        return _first_replica(strategy, logs), nonfinite

    @tf.function
    def on_batch(data):
        return gathered(strategy.run(replica_step, args=(data,)))

    @tf.function
    def on_iterator(iterator):
        return gathered(strategy.run(replica_step, args=(next(iterator),)))

    return on_batch, on_iterator


def nonfinite_parts_mask(data):
    """1 or 0 per part of the batch `(x, y[, sample_weight])`: whether any of
    its floating-point values is NaN or Inf (integer parts never are)."""
    parts = data if isinstance(data, (tuple, list)) else (data,)
    flags = []
    for part in parts:
        checks = [
            tf.reduce_all(tf.math.is_finite(tensor))
            for tensor in tf.nest.flatten(part)
            if tensor.dtype.is_floating
        ]
        flags.append(tf.reduce_all(checks) if checks else tf.constant(True))
    return tf.cast(tf.logical_not(tf.stack(flags)), tf.int32)


def nonfinite_parts(mask):
    """The names of the batch parts `nonfinite_parts_mask` marked (its sum
    over the replicas)."""
    if mask is None:
        return []
    flags = np.asarray(mask).reshape(-1)
    return [name for name, flag in zip(BATCH_PARTS, flags) if flag]


def make_model_test_step(model, strategy):
    """A compiled step: batch -> the model's metrics after its `test_step`."""

    @tf.function
    def on_batch(data):
        return _first_replica(strategy, strategy.run(model.test_step, args=(data,)))

    return on_batch


def _first_replica(strategy, outputs):
    """The first replica's value of each output, the logs `fit` reports
    under a strategy (the metrics' state is kept across the replicas)."""
    return tf.nest.map_structure(
        lambda value: strategy.experimental_local_results(value)[0], outputs
    )


def counting(setup, compiled_step, batch_size=0):
    """`compiled_step` that also advances `setup.step` by one (and
    `setup.examples_seen` by `batch_size`) inside the same compiled call:
    a step and its counters advance together, and nothing runs eagerly
    between two steps but reading the logs (as under `fit`).
    """

    @tf.function
    def counted(*args):
        outputs = compiled_step(*args)
        setup.step.assign_add(1)
        if batch_size:
            setup.examples_seen.assign_add(batch_size)
        return outputs

    return counted


def array_step_fn(setup, train_step, data, batch_size, seed, on_nonfinite):
    """The user's model's step on arrays, in the seeded order; `on_nonfinite`
    receives each batch's `nonfinite_parts_mask` (a tensor, read only when
    needed)."""
    on_batch = counting(setup, train_step[0], batch_size)
    stream = index_batches(
        len(data), batch_size, seed, int(setup.examples_seen.numpy())
    )

    def step_fn(step):
        batch = data.take(next(stream))
        logs, nonfinite = on_batch(to_replicas(setup.strategy, *batch))
        on_nonfinite(nonfinite)
        return dict(scalar_logs(logs))

    return step_fn


def dataset_step_fn(setup, train_step, on_nonfinite):
    """The user's model's step on its dataset's iterator (see `array_step_fn`)."""
    on_batch, on_iterator = (counting(setup, part) for part in train_step)
    iterator, strategy = setup.data_iterator, setup.strategy
    # One replica reads its batch inside the compiled step, as `fit` does.
    in_graph = _is_one_local_replica(strategy)

    def step_fn(step):
        if in_graph:
            logs, nonfinite = on_iterator(iterator)
        else:
            logs, nonfinite = on_batch(to_replicas(strategy, *next(iterator)))
        on_nonfinite(nonfinite)
        return dict(scalar_logs(logs))

    return step_fn


def scalar_logs(logs):
    """`(name, float)` of the scalar entries of Keras logs."""
    for name, value in logs.items():
        value = np.asarray(value)
        if value.shape == ():
            yield name, float(value)

"""Labels a model's loss cannot take, found before step 0 or named when met.

A sparse categorical loss takes class ids in `[0, outputs)`; on a CPU an id
outside fails the step (`InvalidArgumentError`) wherever it sits in the
data. Before step 0 the run looks at what is cheap to look at: every NumPy
label, through the examples that hold each label's smallest and largest
value, and a dataset's whole first batch. A label met later, in a batch of a
dataset, ends the run in one line naming the step, the label and the valid
range, before the step is applied: the checkpoints before it stay the
latest.
"""

from __future__ import annotations

import re

import numpy as np

from tfnorm._keras import tf
from tfnorm.training.data import DataError

# TensorFlow's sparse softmax cross-entropy kernel's own wording.
_OUT_OF_RANGE = re.compile(
    r"label value of (-?\d+) which is outside the valid range of \[(-?\d+), (-?\d+)\)"
)


def extreme_examples(parts):
    """Indices of the examples holding each numeric label's smallest and
    largest value, of NumPy `(x, y[, sample_weight])` parts."""
    found = set()
    for labels in tf.nest.flatten(parts[1]):
        if labels.dtype.kind in "iuf" and labels.size:
            flat = labels.reshape(len(labels), -1)
            found.update((int(flat.min(1).argmin()), int(flat.max(1).argmax())))
    return sorted(found)


def check_batch(evaluate, batch, role, labels=None):
    """`evaluate(batch)`; a label out of range becomes a `DataError` naming
    the label, the valid range and, given all the NumPy `labels` the batch
    was taken from, the first example holding it."""
    try:
        evaluate(batch)
    except tf.errors.InvalidArgumentError as error:
        found = _out_of_range(error)
        if found is None:
            raise
        value, low, high = found
        where = ""
        if labels is not None:
            where = f" (example {_example_of(value, labels)})"
        raise DataError(
            f"data_fn's {role} labels hold {value}{where}, outside the valid "
            f"range [{low}, {high}) of model_fn's outputs and loss; nothing "
            "was trained."
        ) from None


def guarded_step(step_fn, log, step_counter):
    """`step_fn` that ends the run in one line on a label out of range,
    with `step_counter` (a variable) back at the last step done: the
    counter may advance in the same compiled call as the failed step."""

    def step(number):
        def stopped_at(value, low, high):
            step_counter.assign(number - 1)
            return (
                f"step {number}: data_fn's training batch holds label {value}, "
                f"outside the valid range [{low}, {high}) of model_fn's outputs "
                "and loss. The step was not applied and the checkpoints before "
                "it are kept: fix the labels and rerun to resume."
            )

        return _ended_on_bad_label(lambda: step_fn(number), stopped_at, log)

    return step


def guarded_evaluation(evaluate, log):
    """`evaluate` that ends the run in one line on a label out of range."""

    def stopped_at(value, low, high):
        return (
            f"data_fn's validation labels hold {value}, outside the valid "
            f"range [{low}, {high}) of model_fn's outputs and loss; the "
            "checkpoints before the evaluation are kept: fix the labels and "
            "rerun to resume."
        )

    return lambda: _ended_on_bad_label(evaluate, stopped_at, log)


def _ended_on_bad_label(call, stopped_at, log):
    """`call()`; a label out of range becomes a logged one-line `DataError`
    (`stopped_at(value, low, high)` says it), any other error passes."""
    try:
        return call()
    except tf.errors.InvalidArgumentError as error:
        found = _out_of_range(error)
        if found is None:
            raise
        message = stopped_at(*found)
        log.line(message)
        raise DataError(message) from None


def _out_of_range(error):
    match = _OUT_OF_RANGE.search(str(getattr(error, "message", error)))
    return None if match is None else tuple(int(group) for group in match.groups())


def _example_of(value, labels):
    for array in tf.nest.flatten(labels):
        flat = np.asarray(array).reshape(len(array), -1)
        rows = np.nonzero((flat == value).any(axis=1))[0]
        if rows.size:
            return int(rows[0])
    return "?"

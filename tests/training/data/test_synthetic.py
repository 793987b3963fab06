"""The synthetic tasks: deterministic by seed, labels as defined, bad arguments named."""

from __future__ import annotations

import numpy as np
import pytest

from tfnorm.choices import SYNTHETIC_TASKS
from tfnorm.training.data import make_synthetic


@pytest.mark.parametrize("task", SYNTHETIC_TASKS)
def test_synthetic_tasks_are_deterministic_by_seed(task):
    first, first_val = make_synthetic(task, num_examples=128, max_len=10, seed=3)
    again, again_val = make_synthetic(task, num_examples=128, max_len=10, seed=3)
    other, _ = make_synthetic(task, num_examples=128, max_len=10, seed=4)
    np.testing.assert_array_equal(first.ids, again.ids)
    np.testing.assert_array_equal(first.labels, again.labels)
    np.testing.assert_array_equal(first_val.ids, again_val.ids)
    assert not np.array_equal(first.ids, other.ids)
    # Validation examples are drawn separately from training ones.
    assert not np.array_equal(first.ids[:64], first_val.ids[:64])


@pytest.mark.parametrize("task", SYNTHETIC_TASKS)
def test_synthetic_ids_avoid_padding_and_classes_are_balanced(task):
    train, _ = make_synthetic(task, num_examples=600, max_len=12, seed=0)
    assert train.ids.shape == (600, 12) and train.ids.dtype == np.int32
    assert train.ids.min() >= 1 and train.ids.max() < train.vocab_size
    counts = np.bincount(train.labels, minlength=train.num_classes)
    assert counts.min() > 0.5 * 600 / train.num_classes


def test_sorted_labels_match_the_definition():
    train, _ = make_synthetic("sorted", num_examples=400, max_len=9, seed=1)
    expected = np.all(np.diff(train.ids, axis=1) >= 0, axis=1)
    np.testing.assert_array_equal(train.labels, expected)


def test_sorted_negatives_are_out_of_order_at_varying_positions():
    train, _ = make_synthetic("sorted", num_examples=400, max_len=9, seed=1)
    negatives = train.ids[train.labels == 0]
    first_drop = np.argmax(np.diff(negatives, axis=1) < 0, axis=1)
    # No fixed position decides the label: the first descent moves around.
    assert len(set(first_drop.tolist())) >= 6


def test_duplicate_labels_match_the_definition():
    train, _ = make_synthetic("duplicate", num_examples=400, max_len=9, seed=2)
    expected = [len(set(row)) < 9 for row in train.ids.tolist()]
    np.testing.assert_array_equal(train.labels, expected)


def test_majority_label_is_the_unique_most_frequent_class():
    train, _ = make_synthetic(
        "majority", num_examples=300, max_len=9, seed=5, num_classes=3
    )
    assert train.num_classes == 3
    for row, label in zip(train.ids, train.labels):
        counts = np.bincount(row % 3, minlength=3)
        assert counts.argmax() == label
        assert np.sum(counts == counts.max()) == 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"task": "reverse"}, r"Received: task='reverse'"),
        ({"task": "sorted", "max_len": 1}, r"Received: max_len=1"),
        ({"task": "duplicate", "max_len": 10, "vocab_size": 8}, r"vocab_size=8"),
        ({"task": "majority", "num_classes": 1}, r"num_classes=1"),
    ],
)
def test_synthetic_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_synthetic(**kwargs)

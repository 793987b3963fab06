"""The validation split and the truncation report."""

from __future__ import annotations

import pytest

from tfnorm.training.data.preparation import (
    shortest_whole_length,
    split_indices,
    truncation_report,
)


def test_split_is_seeded_disjoint_and_in_file_order():
    train, val = split_indices(100, 0.1, seed=0)
    assert len(val) == 10 and len(train) == 90
    assert sorted(set(train) | set(val)) == list(range(100))
    assert list(train) == sorted(train) and list(val) == sorted(val)
    assert list(split_indices(100, 0.1, seed=0)[1]) == list(val)
    assert list(split_indices(100, 0.1, seed=1)[1]) != list(val)


@pytest.mark.parametrize(
    "count, fraction, held_out",
    [(9, 0.5, 0), (10, 0.01, 1), (10, 0.99, 9), (1000, 0.0, 0), (11, 0.1, 1)],
)
def test_split_sizes(count, fraction, held_out):
    train, val = split_indices(count, fraction, seed=0)
    assert len(val) == held_out and len(train) == count - held_out


def test_shortest_whole_length_keeps_95_percent():
    assert shortest_whole_length(list(range(1, 101))) == 95
    assert shortest_whole_length([5]) == 5
    assert shortest_whole_length([3, 100]) == 100
    assert shortest_whole_length([]) == 0


def test_report_without_cut_texts():
    report, line = truncation_report(16, [3, 4, 5])
    assert report["train_cut"] == 0 and report["val_texts"] == 0
    assert line == (
        "max_len 16 cuts 0 of 3 training texts (0.0%); max_len 5 would keep 95% "
        "of the training texts whole (the longest has 5 tokens)"
    )

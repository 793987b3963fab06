"""The shared type tests behind argument validation."""

from __future__ import annotations

import numpy as np
import pytest

from tfnorm._checks import is_int, is_real


@pytest.mark.parametrize("value", [0, 3, -2, np.int64(5)])
def test_is_int_accepts_integers(value):
    assert is_int(value)


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None])
def test_is_int_rejects_bools_and_non_integers(value):
    assert not is_int(value)


@pytest.mark.parametrize("value", [0, 1e-5, -2.5, np.float32(1e-3), np.int32(2)])
def test_is_real_accepts_finite_numbers(value):
    assert is_real(value)


@pytest.mark.parametrize(
    "value", [True, float("inf"), float("-inf"), float("nan"), np.nan, "1e-5", None]
)
def test_is_real_rejects_bools_non_finite_and_non_numbers(value):
    assert not is_real(value)

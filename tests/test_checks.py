"""The shared type tests behind argument validation."""

from __future__ import annotations

import numpy as np
import pytest

from tfnorm._checks import (
    check_choice,
    check_heads,
    check_int,
    check_number,
    check_rate,
    is_int,
    is_real,
    precision_mode,
)


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


def test_check_int_bounds_and_message():
    assert check_int("seed", np.int64(3), minimum=0, maximum=2**32 - 1) == 3
    with pytest.raises(
        ValueError,
        match=r"`seed` must be an integer in \[0, 4294967295\]\. Received: seed=4294967296",
    ):
        check_int("seed", 2**32, minimum=0, maximum=2**32 - 1)
    with pytest.raises(ValueError, match=r">= 1\. Received: d_model=True"):
        check_int("d_model", True, minimum=1)


@pytest.mark.parametrize("value", [-0.1, 1.0, float("nan"), "0.1", None])
def test_check_rate_is_the_half_open_unit_interval(value):
    with pytest.raises(
        ValueError, match=r"`dropout_rate` must be a finite number in \[0, 1\)"
    ):
        check_rate("dropout_rate", value)


def test_check_number_open_and_closed_bounds():
    assert check_number("final_lr", 0, 0.0, 1.0) == 0.0
    with pytest.raises(ValueError, match=r"> 0\. Received: peak_lr=0"):
        check_number("peak_lr", 0, above=0.0)


def test_check_heads_and_choice_name_the_values():
    check_heads(64, 4)
    with pytest.raises(ValueError, match=r"d_model=64, num_heads=3"):
        check_heads(64, 3)
    with pytest.raises(ValueError, match=r"'mean', 'cls'\. Received: pooling='max'"):
        check_choice("pooling", "max", ("mean", "cls"))


@pytest.mark.parametrize(
    "value, mode",
    [(None, "float32"), ("none", "float32"), ("Float16", "float16"),
     ("mixed_bfloat16", "bfloat16"), ("bfloat16", "bfloat16")],
)  # fmt: skip
def test_precision_mode_aliases(value, mode):
    assert precision_mode(value) == mode


@pytest.mark.parametrize("value", ["fp16", ["float16"], 16, True])
def test_precision_mode_refuses_others(value):
    with pytest.raises(ValueError, match=r"`mixed_precision` must be one of"):
        precision_mode(value)

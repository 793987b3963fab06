"""Argument checks shared by the layers, builders, schedules, callbacks and `TrainConfig`.

Each check returns the value (as a plain Python int/float where it is a
number) or raises `ValueError` naming the argument and the received value, so
a bad `d_model` reads the same whether it came from `TransformerEncoderBlock`,
`build_classifier` or `tfnorm train --d-model`.

`bool` is an `int` subclass, so `True` would pass a plain isinstance test as
an epsilon, a step count or a learning rate; these checks reject it. NumPy
scalars are `numbers` members and are accepted. This module must not import
TensorFlow: the command line's `--help` uses it.
"""

from __future__ import annotations

import math
import numbers

from tfnorm.choices import PRECISION_ALIASES, PRECISION_MODES

#: Largest seed: NumPy's `RandomState` and Keras's seeding take 32-bit seeds.
MAX_SEED = 2**32 - 1
#: The largest finite float32: a learning rate or clipping norm above it is
#: inf once the optimizer casts it, and the weights turn NaN.
FLOAT32_MAX = 3.4028234663852886e38


def is_int(value):
    """An integer, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value):
    """A finite real number, not a bool."""
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
    )


def check_int(name, value, minimum=None, maximum=None):
    """`value` as an int in `[minimum, maximum]` (either bound may be None)."""
    if not is_int(value) or not _within(value, minimum, maximum, True, True):
        raise ValueError(
            f"`{name}` must be an integer{_range_text(minimum, maximum, True, True)}. "
            f"Received: {name}={value!r}"
        )
    return int(value)


def check_positive_int(name, value):
    return check_int(name, value, minimum=1)


def check_number(name, value, minimum=None, maximum=None, *, above=None, below=None):
    """`value` as a finite float with `minimum <= value <= maximum`, `above < value < below`."""
    if (
        not is_real(value)
        or not _within(value, minimum, maximum, True, True)
        or not _within(value, above, below, False, False)
    ):
        bounds = _range_text(minimum, maximum, True, True) or _range_text(
            above, below, False, False
        )
        if minimum is not None and below is not None:
            bounds = f" in [{_number(minimum)}, {_number(below)})"
        if above is not None and maximum is not None:
            bounds = f" in ({_number(above)}, {_number(maximum)}]"
        raise ValueError(
            f"`{name}` must be a finite number{bounds}. Received: {name}={value!r}"
        )
    return float(value)


def check_rate(name, value):
    """A dropout-style rate: a number in [0, 1)."""
    return check_number(name, value, minimum=0.0, below=1.0)


def check_choice(name, value, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(
            f"`{name}` must be one of {', '.join(map(repr, choices))}. "
            f"Received: {name}={value!r}"
        )
    return value


def check_heads(d_model, num_heads):
    """Each attention head gets `d_model // num_heads` features: they must divide."""
    if d_model % num_heads:
        raise ValueError(
            "`d_model` must be divisible by `num_heads` (each head gets "
            f"d_model // num_heads features). Received: d_model={d_model}, "
            f"num_heads={num_heads}"
        )


def check_block_sizes(d_model, num_heads, dff):
    """A Transformer block's widths as positive ints, the heads dividing
    `d_model`; returns `(d_model, num_heads, dff)`."""
    d_model = check_positive_int("d_model", d_model)
    num_heads = check_positive_int("num_heads", num_heads)
    dff = check_positive_int("dff", dff)
    check_heads(d_model, num_heads)
    return d_model, num_heads, dff


def check_seed(name, value):
    return check_int(name, value, minimum=0, maximum=MAX_SEED)


def precision_mode(value, name="mixed_precision"):
    """The precision mode (`float32`, `float16`, `bfloat16`) `value` names."""
    mode = value.lower() if isinstance(value, str) else value
    mode = PRECISION_ALIASES.get(mode, mode) if _hashable(mode) else mode
    if mode not in PRECISION_MODES:
        raise ValueError(
            f"`{name}` must be one of {', '.join(map(repr, PRECISION_MODES))} (or "
            "the Keras policy names 'mixed_float16', 'mixed_bfloat16'). "
            f"Received: {name}={value!r}"
        )
    return mode


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _within(value, low, high, low_inclusive, high_inclusive):
    if low is not None and not (value >= low if low_inclusive else value > low):
        return False
    return high is None or (value <= high if high_inclusive else value < high)


def _range_text(low, high, low_inclusive, high_inclusive):
    if low is not None and high is not None:
        left = "[" if low_inclusive else "("
        right = "]" if high_inclusive else ")"
        return f" in {left}{_number(low)}, {_number(high)}{right}"
    if low is not None:
        return f" {'>=' if low_inclusive else '>'} {_number(low)}"
    if high is not None:
        return f" {'<=' if high_inclusive else '<'} {_number(high)}"
    return ""


def _number(value):
    return str(value) if is_int(value) else f"{value:g}"

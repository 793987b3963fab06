"""Type tests shared by argument validation across tfnorm.

`bool` is an `int` subclass, so `True` would pass a plain isinstance test as
an epsilon, a step count or a learning rate; these reject it. NumPy scalars
are `numbers` members and are accepted.
"""

from __future__ import annotations

import math
import numbers


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

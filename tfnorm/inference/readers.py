"""The readers of `tfnorm predict`'s and `tfnorm generate`'s numbers.

Like `tfnorm.settings.readers`, each takes `(key, value)` and returns the
value checked or raises `ValueError`; the message names the setting twice
by `setting_key` ("top_k must be an integer >= 1. Received: top_k=0"), so
that the command line says `--top-k` in both places. No TensorFlow.
"""

from __future__ import annotations

import math

from tfnorm._checks import is_int, is_real
from tfnorm._errors import setting_key


def bounded(kind, wanted, fits=lambda value: True):
    """A reader of an `int` or `float` (`kind`) for which `fits(value)`
    holds, `wanted` saying which in the error."""

    def read(key, value):
        number = _converted(kind, value)
        if number is None or not (math.isfinite(number) and fits(number)):
            shown = number if number is not None else value
            shown = f"{shown:g}" if isinstance(shown, float) else shown
            raise ValueError(
                f"{setting_key(key)} must be {wanted}. "
                f"Received: {setting_key(key)}={shown}"
            )
        return number

    return read


def _converted(kind, value):
    """`value` as a `kind`, from a number or its text; None when it is not one."""
    if isinstance(value, str):
        try:
            return kind(value.strip())
        except ValueError:
            return None
    if kind is int:
        return int(value) if is_int(value) else None
    return float(value) if is_real(value) else None


def texts(key, value):
    """A list of strings (a repeated flag's values) as a tuple."""
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, (list, tuple)) or not all(
        isinstance(text, str) for text in values
    ):
        raise ValueError(
            f"{setting_key(key)} must be texts. Received: {setting_key(key)}={value!r}"
        )
    return tuple(values)

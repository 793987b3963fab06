"""The readers of `tfnorm compare`'s list and name settings (`CompareConfig`).

Each takes `(key, value)`, a flag's string(s) or a notebook's Python value,
and returns the value checked and converted, or raises `ValueError` naming
the key and the value. A reader marked `many` makes its flag take one or more
values (`--seeds 0 1 2`).
"""

from __future__ import annotations

from tfnorm._checks import FLOAT32_MAX, MAX_SEED
from tfnorm.choices import NORM_NAMES, NORM_POSITIONS, norm_choice, spelled_out
from tfnorm.training.config.settings import integer, number


def seeds(key, value):
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(
            f"`{key}` must name at least one seed. Received: {key}={value!r}"
        )
    read = integer(0, MAX_SEED)
    return tuple(read(key, seed) for seed in value)


seeds.many = True  # a list: `--flag A B C`


def depths(key, value):
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(
            f"`{key}` must name at least one depth. Received: {key}={value!r}"
        )
    read = integer(1, 64)
    return tuple(read(key, depth) for depth in value)


depths.many = True  # a list: `--flag A B C`


def fractions(maximum):
    """A reader of a list of fractions in [0, `maximum`]."""

    def read_fractions(key, value):
        return _fraction_list(key, value, maximum)

    read_fractions.many = True  # a list: `--flag A B C`
    return read_fractions


def _fraction_list(key, value, maximum):
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(
            f"`{key}` must name at least one fraction. Received: {key}={value!r}"
        )
    read = number(0.0, below=maximum + 1e-9)
    return tuple(float(read(key, fraction)) for fraction in value)


def variants(key, value):
    """`post:60 pre` -> `(("post", 60), ("pre", 0))`: position[:warm-up[:rate]]."""
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    # A resolved value (tuples) reads back as itself.
    parts = [
        list(entry) if isinstance(entry, (list, tuple)) else str(entry).split(":")
        for entry in value or ()
    ]
    if not parts or any(
        not 1 <= len(p) <= 3 or p[0] not in NORM_POSITIONS for p in parts
    ):
        raise ValueError(
            f"`{key}` must name variants as POSITION[:WARMUP[:RATE]], the "
            f"position one of {spelled_out(NORM_POSITIONS)}. Received: {key}={value!r}"
        )
    steps, rate = integer(0), number(above=0.0, maximum=FLOAT32_MAX)
    return tuple(
        (p[0], steps(key, p[1] if len(p) > 1 else 0))
        + ((rate(key, p[2]),) if len(p) == 3 else ())
        for p in parts
    )


variants.many = True  # a list: `--flag A B C`


def norm_name(key, value):
    short = norm_choice(value.strip()) if isinstance(value, str) else None
    if short is None:
        raise ValueError(
            f"`{key}` must be a norm name ({spelled_out(NORM_NAMES)}). "
            f"Received: {key}={value!r}"
        )
    return short


def norm_names(key, value):
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(
            f"`{key}` must name at least one norm ({spelled_out(NORM_NAMES)}). "
            f"Received: {key}={value!r}"
        )
    return tuple(dict.fromkeys(norm_name(key, name) for name in value))


norm_names.many = True  # a list: `--flag A B C`

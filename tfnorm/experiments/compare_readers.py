"""The readers of `tfnorm compare`'s list and name settings (`CompareConfig`),
and the check of its controls' settings taken together (`check_controls`).

Each takes `(key, value)`, a flag's string(s) or a notebook's Python value,
and returns the value checked and converted, or raises `ValueError` naming
the key and the value. A reader marked `many` makes its flag take one or more
values (`--seeds 0 1 2`).
"""

from __future__ import annotations

from tfnorm._checks import FLOAT32_MAX, MAX_SEED
from tfnorm.choices import (
    COMPARE_CONTROL_NORMS,
    NORM_NAMES,
    NORM_POSITIONS,
    norm_choice,
    spelled_out,
)
from tfnorm.settings.config_error import ConfigError
from tfnorm.settings.readers import integer, number


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
    """A norm of the family, or a control outside it (`COMPARE_CONTROL_NORMS`)."""
    short = norm_choice(value.strip()) if isinstance(value, str) else None
    if isinstance(value, str) and value.strip().lower() in COMPARE_CONTROL_NORMS:
        short = value.strip().lower()
    if short is None:
        raise ValueError(
            f"`{key}` must be a norm name "
            f"({spelled_out(NORM_NAMES + COMPARE_CONTROL_NORMS)}). "
            f"Received: {key}={value!r}"
        )
    return short


def norm_names(key, value):
    """Norms of the family only: a control is refused by name."""
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(
            f"`{key}` must name at least one norm ({spelled_out(NORM_NAMES)}). "
            f"Received: {key}={value!r}"
        )
    names = tuple(dict.fromkeys(norm_name(key, name) for name in value))
    for name in names:
        if name not in NORM_NAMES:
            raise ValueError(
                f"`{key}` must be a norm of the family ({spelled_out(NORM_NAMES)}); "
                f"{name} is a control. Received: {key}={name!r}"
            )
    return names


norm_names.many = True  # a list: `--flag A B C`


def check_controls(values):
    """The controls' settings together: each applies where it can."""
    if values["statistics"] == "compute" and values["norm"] != "layer":
        raise ConfigError(
            "statistics",
            "`statistics` 'compute' is a LayerNorm control: it needs norm "
            f"'layer'. Received: statistics='compute' with norm={values['norm']!r}",
        )
    other_norms = [n for n in values["norms"] or () if n != "layer"]
    if values["statistics"] == "compute" and other_norms:
        # Every norm of the run becomes the LayerNorm control, so these runs
        # would be labelled with norms they do not use.
        raise ConfigError(
            "norms",
            "`statistics` 'compute' replaces every norm with a LayerNorm "
            "control, so `norms` can only be 'layer'. Received: "
            f"norms={list(values['norms'])!r} with statistics='compute'",
        )
    if values["variable_length"] and values["task"] != "reverse":
        raise ConfigError(
            "variable_length",
            "`variable_length` pads the reverse task. Received: "
            f"variable_length=True with task={values['task']!r}",
        )

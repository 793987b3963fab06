"""The readers of `tfnorm compare`'s list and norm settings, and the checks
of its controls' settings (`warmup_settings.CompareConfig` declares them).

No TensorFlow here: `tfnorm compare --help` is built from them.
"""

from __future__ import annotations

from tfnorm._checks import MAX_SEED
from tfnorm.choices import (
    COMPARE_CONTROL_NORMS,
    NORM_NAMES,
    norm_choice,
    spelled_out,
)
from tfnorm.training.config.settings import ConfigError, choice, integer


def read_seeds(key, value):
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(
            f"`{key}` must name at least one seed. Received: {key}={value!r}"
        )
    read = integer(0, MAX_SEED)
    return tuple(read(key, seed) for seed in value)


read_seeds.many = True  # a list: `--flag A B C`


def read_depths(key, value):
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(
            f"`{key}` must name at least one depth. Received: {key}={value!r}"
        )
    read = integer(1, 64)
    return tuple(read(key, depth) for depth in value)


read_depths.many = True  # a list: `--flag A B C`


def read_norm(key, value):
    short = norm_choice(value.strip()) if isinstance(value, str) else None
    if isinstance(value, str) and value.strip().lower() in COMPARE_CONTROL_NORMS:
        short = value.strip().lower()
    if short is None:
        raise ValueError(
            f"`{key}` must be a norm name ({spelled_out(NORM_NAMES + COMPARE_CONTROL_NORMS)}). "
            f"Received: {key}={value!r}"
        )
    return short


#: The runs per seed `variants` may choose from (`warmup.variants`).
VARIANTS = ("post", "post-warmup", "post-control", "pre", "pre-warmup")


def read_variants(key, value):
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    read = choice(VARIANTS)
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(
            f"`{key}` must name at least one of {spelled_out(VARIANTS, 'and')}. "
            f"Received: {key}={value!r}"
        )
    return tuple(read(key, name) for name in value)


read_variants.many = True  # a list: `--flag A B C`


def read_norms(key, value):
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(
            f"`{key}` must name at least one norm ({spelled_out(NORM_NAMES)}). "
            f"Received: {key}={value!r}"
        )
    names = tuple(dict.fromkeys(read_norm(key, name) for name in value))
    for name in names:
        if name not in NORM_NAMES:
            raise ValueError(
                f"`{key}` must be a norm of the family ({spelled_out(NORM_NAMES)}); "
                f"{name} is a control. Received: {key}={name!r}"
            )
    return names


read_norms.many = True  # a list: `--flag A B C`


def check_controls(values):
    """The controls' settings together: each applies where it can."""
    if values["statistics"] == "compute" and values["norm"] != "layer":
        raise ConfigError(
            "statistics",
            "`statistics` 'compute' is a LayerNorm control: it needs norm "
            f"'layer'. Received: statistics='compute' with norm={values['norm']!r}",
        )
    if values["variable_length"] and values["task"] != "reverse":
        raise ConfigError(
            "variable_length",
            "`variable_length` pads the reverse task. Received: "
            f"variable_length=True with task={values['task']!r}",
        )

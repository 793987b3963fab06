"""Fail early, and clearly, when TensorFlow is missing or too old.

This module must not import TensorFlow at module level: it is what decides
whether TensorFlow can be imported at all.
"""

from __future__ import annotations

MINIMUM_TENSORFLOW = (2, 9)

_INSTALL_HINT = (
    "Install one TensorFlow build next to tfnorm: `pip install tensorflow-cpu`, "
    'or `tensorflow` for GPUs (from tfnorm\'s clone, `pip install ".[cpu]"` '
    "installs tfnorm with tensorflow-cpu), or keep the one your image already "
    "ships (e.g. tensorflow/tensorflow:2.9.0-gpu-jupyter)."
)


def _parse_version(text: str) -> tuple:
    numbers = []
    for part in text.split(".")[:2]:
        digits = ""
        for char in part:
            if not char.isdigit():
                break
            digits += char
        numbers.append(int(digits or 0))
    return tuple(numbers)


def check_tensorflow():
    """Imports TensorFlow and returns it, or raises ImportError saying what to do."""
    try:
        import tensorflow as tf
    except ImportError as error:
        raise ImportError(
            f"tfnorm needs TensorFlow >= 2.9, but it could not be imported "
            f"({error}). {_INSTALL_HINT}"
        ) from None
    version = getattr(tf, "__version__", "0.0")
    if _parse_version(version) < MINIMUM_TENSORFLOW:
        raise ImportError(
            f"tfnorm needs TensorFlow >= 2.9, found TensorFlow {version}. "
            f"{_INSTALL_HINT}"
        )
    return tf

"""Training pieces: learning-rate schedules, optimizers, mixed precision, `train`,
and `predict` (a finished text run's model on new texts).

The names below are imported on first use, so that `tfnorm.training.config`
(which the `tfnorm` command's parser is built from) can be imported without
TensorFlow; `import tfnorm` imports the modules that register Keras objects.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "AdamW": "optimizers",
    "make_optimizer": "optimizers",
    "WarmupSchedule": "schedules",
    "set_mixed_precision": "precision",
    "wrap_for_mixed_precision": "precision",
    "TrainConfig": "config",
    "train": "trainer",
    "Predictor": "prediction",
    "predict": "prediction",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_EXPORTS[name]}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))

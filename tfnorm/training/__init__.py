"""`train` (the run behind `tfnorm train`), built from rooms that import
only downward: `config` (settings, read without TensorFlow), `data`,
`rundir` (the run directory), `loop` (steps and what happens between them),
`workloads` (what is trained), then `trainer` at the top.

Using a run's model afterwards lives in `tfnorm.inference`; its `predict`
and `Predictor` are re-exported here, where they were before it existed.

The optimisation pieces live in `tfnorm.optim` and are re-exported here, as
they were before that package existed. The names below are imported on first
use, so that the config can be read without TensorFlow; `import tfnorm`
imports the modules that register Keras objects.
"""

from __future__ import annotations

from tfnorm._lazy_exports import lazy_exports

_EXPORTS = {
    "AdamW": "tfnorm.optim.optimizers",
    "make_optimizer": "tfnorm.optim.optimizers",
    "WarmupSchedule": "tfnorm.optim.schedules",
    "set_mixed_precision": "tfnorm.optim.precision",
    "wrap_for_mixed_precision": "tfnorm.optim.precision",
    "TrainConfig": "tfnorm.training.config.train_config",
    "train": "tfnorm.training.trainer",
    "Predictor": "tfnorm.inference.prediction",
    "predict": "tfnorm.inference.prediction",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

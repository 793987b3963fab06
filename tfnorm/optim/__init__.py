"""Optimisation pieces any Keras user can take: AdamW with decoupled weight
decay that skips norm weights and biases, the warm-up learning-rate schedule,
and mixed precision set up so that a norm's statistics stay in float32.

`tfnorm train` and the experiments build on these; nothing here knows about a
run directory or a workload.
"""

from __future__ import annotations

from tfnorm.optim.optimizers import AdamW, make_optimizer
from tfnorm.optim.precision import set_mixed_precision, wrap_for_mixed_precision
from tfnorm.optim.schedules import WarmupSchedule

__all__ = [
    "AdamW",
    "WarmupSchedule",
    "make_optimizer",
    "set_mixed_precision",
    "wrap_for_mixed_precision",
]

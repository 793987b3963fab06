"""Training pieces: learning-rate schedules, optimizers, mixed precision."""

from __future__ import annotations

from tfnorm.training.config import TrainConfig
from tfnorm.training.optimizers import AdamW, make_optimizer
from tfnorm.training.precision import set_mixed_precision, wrap_for_mixed_precision
from tfnorm.training.schedules import WarmupSchedule
from tfnorm.training.trainer import train

__all__ = [
    "AdamW",
    "WarmupSchedule",
    "make_optimizer",
    "set_mixed_precision",
    "wrap_for_mixed_precision",
    "TrainConfig",
    "train",
]

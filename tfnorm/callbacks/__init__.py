"""Keras callbacks that watch normalisation layers during training.

* `NormHistogramCallback`: TensorBoard histograms and scalars of every norm
  layer's outputs (and inputs), tagged by the layer's path in the model.
* `NormHealthMonitor`: reports NaN/Inf and collapsing input variance in norm
  layers, and non-finite losses, with the layer's name and the step.
* `GradientNormCallback`: per-layer gradient norms as TensorBoard scalars.

All three probe the model on a fixed batch in a function of their own, so
training itself (its variables, random streams and loss) is unchanged.

The modules: `base` (periodic scheduling and TensorBoard writing), `probe`
(the norm probe and probe data), `layers` (finding layers by path and
reading a norm's statistic), and one module per callback.
"""

from __future__ import annotations

from tfnorm.callbacks.gradient_norm import GradientNormCallback
from tfnorm.callbacks.health_monitor import (
    NormHealthError,
    NormHealthMonitor,
    NormHealthWarning,
    NormProblem,
)
from tfnorm.callbacks.layers import find_norm_layers, walk_layers
from tfnorm.callbacks.norm_histogram import NormHistogramCallback

__all__ = [
    "GradientNormCallback",
    "NormHealthError",
    "NormHealthMonitor",
    "NormHealthWarning",
    "NormHistogramCallback",
    "NormProblem",
    "find_norm_layers",
    "walk_layers",
]

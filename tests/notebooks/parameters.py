"""Smaller values for the notebooks' `parameters` cells, for the container
check (tests/container), which shows that every cell runs in the container's
kernel; tests/notebooks runs them at their defaults.

As papermill does, a cell placed after the `parameters` cell sets them, and
every cell of the notebook still runs.
"""

from __future__ import annotations

SMALL_PARAMETERS = {
    "02_pre_vs_post_ln": "NUM_LAYERS = 1\nSTEPS = 20\nWARMUP_STEPS = 5\n"
    "GRADIENT_LAYERS = 2\n",
    "03_tensorboard_norm_monitoring": "EPOCHS = 1\n",
    "04_multi_gpu": "EPOCHS = 1\nNUM_EXAMPLES = 512\n",
}

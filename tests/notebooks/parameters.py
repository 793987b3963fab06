"""Smaller values for the notebooks' `parameters` cells.

As papermill does, a cell placed after the `parameters` cell sets them, and
every cell of the notebook still runs.

`SMALL_PARAMETERS` is for the container check (tests/container), which shows
that every cell runs in the container's kernel; tests/notebooks runs the
notebooks at their defaults, except those in `SUITE_PARAMETERS`.

`SUITE_PARAMETERS` is for notebooks whose default run takes minutes: the test
suites run them at these sizes (seconds), in a Jupyter kernel (keras3) and as
a plain script in every runtime (the TF 2.9 root has no Jupyter). Their
executed copies in docs/notebooks still show the default size.
"""

from __future__ import annotations

_DECODER_SMALL = (
    "NUM_LAYERS = 2\nD_MODEL = 32\nDFF = 64\nSEQ_LEN = 32\nBATCH_SIZE = 4\n"
    "VAL_WINDOWS = 8\n"
    "STEPS = 6\nEVAL_EVERY = 3\nHISTOGRAM_EVERY = 3\nNEW_TOKENS = 4\n"
)

SMALL_PARAMETERS = {
    "02_pre_vs_post_ln": "NUM_LAYERS = 1\nSTEPS = 20\nWARMUP_STEPS = 5\n"
    "GRADIENT_LAYERS = 2\n",
    "03_tensorboard_norm_monitoring": "EPOCHS = 1\n",
    "04_multi_gpu": "EPOCHS = 1\nNUM_EXAMPLES = 512\n",
    "05_decoder": _DECODER_SMALL,
}

SUITE_PARAMETERS = {
    # Its defaults train 6-layer encoders for 150 steps per run (3.7 minutes
    # of CI's slow run); the executed copy in docs/notebooks shows that run,
    # checked to be of this notebook and to have run cleanly.
    "02_pre_vs_post_ln": SMALL_PARAMETERS["02_pre_vs_post_ln"],
    "05_decoder": _DECODER_SMALL,
}

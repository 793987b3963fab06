"""The default sizes of the `tfnorm compare` experiment (`tfnorm.experiments.warmup.run_comparison`).

Kept apart from the experiment, which imports TensorFlow, so that `tfnorm
compare --help` can show them at once.
"""

from __future__ import annotations

DEFAULTS = {
    "num_layers": 6,
    "d_model": 32,
    "num_heads": 4,
    "dff": 128,
    "vocab_size": 10,
    "seq_len": 12,
    "batch_size": 32,
    "steps": 300,
    "learning_rate": 1e-2,
    "warmup_steps": 300,
    "seeds": (0, 1, 2),
    "norm": "layer",
    "epsilon": 1e-5,
    "eval_size": 512,
    "eval_every": 10,
    "jit_compile": True,
}

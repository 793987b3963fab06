"""The named choices of tfnorm's settings, importable without TensorFlow.

The modules that implement each choice import its tuple from here, and so
does the command line, whose `--help` must answer without loading
TensorFlow (it takes seconds to import).
"""

from __future__ import annotations

#: `norm_position` of `TransformerEncoderBlock` and the encoder builders.
NORM_POSITIONS = ("post", "pre", "sandwich", "deepnorm")

#: `pooling` of `SequencePooling` / `build_classifier`.
POOLINGS = ("mean", "cls")

#: Synthetic tasks of `tfnorm.training.data.make_synthetic`.
SYNTHETIC_TASKS = ("sorted", "duplicate", "majority")

#: Tasks of `tfnorm compare` (`tfnorm.experiments.warmup.run_comparison`).
COMPARE_TASKS = ("reverse", "mlm")
#: Units of the `mlm` task (`tfnorm.experiments.text_task`).
TEXT_UNITS = ("char", "word")

#: Optimizer names of `tfnorm.training.make_optimizer`.
OPTIMIZERS = ("adamw", "adam", "sgd")

#: Learning-rate decays of `tfnorm.training.WarmupSchedule`.
DECAYS = ("cosine", "linear", "inverse_sqrt", "constant")

#: Distribution strategies of `tfnorm.distribute.get_strategy`.
STRATEGIES = ("auto", "default", "one_device", "mirrored", "multi_worker")

#: Precision modes and the Keras dtype policy each one selects.
PRECISION_POLICIES = {
    "float32": "float32",
    "float16": "mixed_float16",
    "bfloat16": "mixed_bfloat16",
}
PRECISION_MODES = tuple(PRECISION_POLICIES)
#: Other spellings accepted for a precision mode: none at all, or the policy names.
PRECISION_ALIASES = {
    None: "float32",
    "none": "float32",
    "off": "float32",
    "mixed_float16": "float16",
    "mixed_bfloat16": "bfloat16",
}

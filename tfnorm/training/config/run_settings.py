"""`RunSettings`: the declared settings of how a run trains and what it
writes: optimisation, runtime, outputs (part of `TrainConfig`).

No TensorFlow at import time: `--help` is built from here.
"""

from __future__ import annotations

import dataclasses

from tfnorm._checks import FLOAT32_MAX, MAX_SEED
from tfnorm._errors import setting_key
from tfnorm.choices import (
    DECAY_TARGETS,
    DECAYS,
    OPTIMIZERS,
    PRECISION_MODES,
    STRATEGIES,
)
from tfnorm.settings.readers import (
    boolean,
    choice,
    creatable,
    device_list,
    integer,
    number,
)
from tfnorm.settings.setting import FIXED, FREE, LOGGED, setting
from tfnorm.training.config.readers import (
    precision,
)
from tfnorm.training.config.train_defaults import (
    NON_NEGATIVE,
    OPTIMISATION,
    OUTPUTS,
    POSITIVE,
    RUNTIME,
)
from tfnorm.training.config.workload_scope import (
    EVERY_WORKLOAD,
    LANGUAGE_MODEL,
    TFNORM_MODELS,
)


@dataclasses.dataclass
class RunSettings:
    """The optimisation, runtime and output settings of `TrainConfig`
    (see `tfnorm train --help`)."""

    # Optimisation.
    optimizer: str = setting(
        "adamw", OPTIMISATION, "optimizer", choice(OPTIMIZERS), resume=FIXED, workloads=EVERY_WORKLOAD
    )  # fmt: skip
    learning_rate: float = setting(
        1e-3, OPTIMISATION, "peak learning rate", number(maximum=FLOAT32_MAX, above=0.0),
        resume=LOGGED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    warmup_steps: int = setting(
        0, OPTIMISATION, "linear warm-up steps, 0 for none", NON_NEGATIVE,
        resume=LOGGED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    decay: str = setting(
        "cosine", OPTIMISATION, "learning-rate decay after warm-up", choice(DECAYS),
        resume=LOGGED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    weight_decay: float = setting(
        0.01, OPTIMISATION, "decoupled weight decay of adamw, on the variables "
        f"{setting_key('weight_decay_on')} names", number(0.0), resume=LOGGED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    min_learning_rate: float = setting(
        0.0, OPTIMISATION, f"the floor the {setting_key('decay')} decays towards "
        f"(cosine and linear end there; at most {setting_key('learning_rate')})",
        number(0.0, FLOAT32_MAX), resume=LOGGED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    beta1: float = setting(
        0.9, OPTIMISATION, "Adam's decay rate of the gradient mean (adam, adamw)",
        number(0.0, below=1.0), resume=LOGGED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    beta2: float = setting(
        0.999, OPTIMISATION, "Adam's decay rate of the squared gradient (adam, adamw; language models often use 0.95)",
        number(0.0, below=1.0), resume=LOGGED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    adam_epsilon: float = setting(
        1e-8, OPTIMISATION, "Adam's stabiliser added to the root of the squared gradient (adam, adamw)",
        number(maximum=FLOAT32_MAX, above=0.0), resume=LOGGED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    weight_decay_on: str = setting(
        "matrices", OPTIMISATION, f"the variables {setting_key('weight_decay')} shrinks: matrices (dense "
        "kernels and embeddings), kernels (dense kernels only, not embeddings), matrices_and_biases, or all "
        "(the norms' gamma/beta too); norms and biases are skipped unless named",
        choice(DECAY_TARGETS), resume=LOGGED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    clipnorm: float | None = setting(
        1.0, OPTIMISATION, "global gradient-norm clipping, 'none' or 0 to disable",
        number(maximum=FLOAT32_MAX, above=0.0), optional=True, off=("off", "false", "0", 0, False), resume=LOGGED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    epochs: int | None = setting(
        None, OPTIMISATION, f"passes over the data; with {setting_key('max_steps')}, "
        "whichever ends first", POSITIVE, optional=True,
        default_text=f"1, or as many as {setting_key('max_steps')} takes",
        resume=LOGGED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    max_steps: int | None = setting(
        None, OPTIMISATION, "the step the run ends at (the learning-rate decay "
        "ends there too)", POSITIVE, optional=True,
        default_text=f"{setting_key('epochs')} passes", resume=LOGGED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    steps_per_epoch: int | None = setting(
        None, OPTIMISATION, "steps per epoch", POSITIVE,
        optional=True, default_text="one pass over the training set", resume=LOGGED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    batch_size: int = setting(
        32, OPTIMISATION, "global batch size, split over the replicas",
        integer(1, 2**20), resume=FIXED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    seed: int = setting(
        0, OPTIMISATION, f"seed of the data, weights and order (0..{MAX_SEED})",
        integer(0, MAX_SEED), resume=FIXED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    eval_every: int | None = setting(
        None, OPTIMISATION, "steps between validation evaluations, plus one at step 0 and at the last step",
        POSITIVE, optional=True, default_text="each epoch end and the last step (a language model: step 0 too)",
        resume=FREE, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    eval_batches: int | None = setting(
        None, OPTIMISATION, "estimate the validation loss between evaluations from this many fixed batches "
        "of the held-out text; the evaluation at the last step reads all of it", POSITIVE, optional=True,
        default_text="all of the held-out text", resume=LOGGED, workloads=(LANGUAGE_MODEL,),
    )  # fmt: skip
    keep_best: bool = setting(
        False, OUTPUTS, "also keep the checkpoint of the lowest validation loss in CHECKPOINT_DIR/best",
        boolean, flags=("--keep-best",), action="store_true", resume=LOGGED, workloads=(LANGUAGE_MODEL,),
    )  # fmt: skip
    # Runtime.
    strategy: str = setting(
        "auto", RUNTIME, "distribution: auto picks multi_worker from a "
        "multi-worker TF_CONFIG, mirrored for 2+ GPUs, one_device for 1 GPU, "
        "else default", choice(STRATEGIES), resume=FREE, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    devices: list | None = setting(
        None, RUNTIME, f"comma-separated devices for {setting_key('strategy')} "
        "mirrored/one_device (e.g. /gpu:0,/gpu:1)", device_list,
        optional=True, metavar="LIST", default_text="all visible", resume=FREE, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    jit_compile: bool = setting(
        False, RUNTIME, "XLA-compile the training step of tfnorm's models "
        "(one replica only)", boolean, flags=("--jit-compile",),
        action="store_true", resume=LOGGED, workloads=TFNORM_MODELS,
    )  # fmt: skip
    mixed_precision: str = setting(
        "float32", RUNTIME, "float16 (with loss scaling) or bfloat16 compute",
        precision, metavar="{" + ",".join(PRECISION_MODES) + "}", resume=FIXED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    # Outputs.
    logdir: str = setting(
        "runs/tfnorm", OUTPUTS, "TensorBoard logs, summary.json and the "
        "exported model; one run at a time (a second run on it is refused, "
        f"even with its own {setting_key('checkpoint_dir')})", creatable("directory"),
        metavar="DIR", resume=FREE, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    checkpoint_dir: str | None = setting(
        None, OUTPUTS, "checkpoints; rerunning with the same one resumes",
        creatable("directory"), optional=True, metavar="DIR",
        default_text="LOGDIR/checkpoints", resume=FREE, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    checkpoint_every: int = setting(
        100, OUTPUTS, "steps between checkpoints, plus one at the last step",
        POSITIVE, resume=FREE, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    epoch_checkpoints: bool = setting(
        False, OUTPUTS, "also save a checkpoint at each epoch end",
        boolean, flags=("--epoch-checkpoints",), action="store_true", resume=FREE, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    keep_checkpoints: int = setting(
        3, OUTPUTS, "checkpoints kept", POSITIVE, resume=FREE, workloads=EVERY_WORKLOAD
    )
    log_every: int = setting(
        10, OUTPUTS, "steps between progress lines, plus one at the last step",
        POSITIVE, resume=FREE, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    histogram_every: int = setting(
        100, OUTPUTS, "steps between norm histograms in LOGDIR/norms (plus "
        "step 0 and the last step), 0 for none",
        NON_NEGATIVE, resume=FREE, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    log_file: str | None = setting(
        None, OUTPUTS, "also append the progress lines to this file "
        "(line-buffered; not a symbolic link, not a data file)",
        creatable("file"), optional=True, metavar="PATH", resume=FREE, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    export: bool = setting(
        True, OUTPUTS, "do not export the final model (checkpoints and logs "
        "only)", boolean, flags=("--no-export",), action="store_false", resume=FREE, workloads=EVERY_WORKLOAD,
    )  # fmt: skip

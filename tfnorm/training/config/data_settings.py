"""`DataSettings`: the declared settings of what a run trains on: the user's
own model and data, or a synthetic task or files (part of `TrainConfig`).

No TensorFlow at import time: `--help` is built from here.
"""

from __future__ import annotations

import dataclasses

from tfnorm._errors import setting_key
from tfnorm.choices import (
    LANGUAGE_MODEL_TASK,
    TRAIN_TASKS,
    WINDOW_ORDERS,
)
from tfnorm.settings.readers import (
    boolean,
    choice,
    existing_file,
    integer,
    number,
)
from tfnorm.settings.setting import FIXED, LOGGED, setting
from tfnorm.training.config.readers import (
    data_paths,
    function_spec,
    loss_name,
)
from tfnorm.training.config.train_defaults import (
    DATA,
    DEFAULT_VAL_SPLIT,
    MAX_SYNTHETIC_EXAMPLES,
    MIN_MAX_LEN,
    VOCAB_SIZE_DEFAULT_TEXT,
    YOUR_MODEL,
    sized,
)
from tfnorm.training.config.workload_scope import (
    CLASSIFIER,
    EVERY_WORKLOAD,
    LANGUAGE_MODEL,
    OWN_MODEL,
    TFNORM_MODELS,
)


@dataclasses.dataclass
class DataSettings:
    """The data settings of `TrainConfig` (see `tfnorm train --help`)."""

    # The user's own model and data.
    model_fn: str | None = setting(
        None, YOUR_MODEL, "MODULE:FUNCTION returning a Keras model (MODULE a "
        "module name or path/to/file.py); called under the distribution "
        "strategy's scope. A compiled model keeps its optimizer, loss and "
        f"metrics; an uncompiled one gets the optimisation settings and {setting_key('loss')}",
        function_spec, optional=True, metavar="MODULE:FUNCTION", resume=FIXED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    data_fn: str | None = setting(
        None, YOUR_MODEL, "MODULE:FUNCTION returning the training data or "
        "(train, validation): tf.data.Datasets of (x, y) batches or NumPy "
        f"arrays (x, y), which the run batches by {setting_key('batch_size')}",
        function_spec, optional=True, metavar="MODULE:FUNCTION", resume=FIXED, workloads=EVERY_WORKLOAD,
    )  # fmt: skip
    loss: str | None = setting(
        None, YOUR_MODEL, f"Keras loss of an uncompiled {setting_key('model_fn')} model, e.g. "
        "sparse_categorical_crossentropy", loss_name, optional=True,
        metavar="NAME", resume=FIXED, workloads=(OWN_MODEL,),
    )  # fmt: skip
    from_logits: bool = setting(
        False, YOUR_MODEL, f"the {setting_key('loss')} takes logits (the model has no softmax)",
        boolean, flags=("--from-logits",), action="store_true", resume=FIXED, workloads=(OWN_MODEL,),
    )  # fmt: skip
    # Data: a synthetic task or files.
    task: str | None = setting(
        None, DATA, "synthetic task: sorted (is the sequence sorted), duplicate (does a "
        "token occur twice), majority (most frequent token class); or lm, a "
        f"causal language model of the text in {setting_key('data')}",
        choice(TRAIN_TASKS), optional=True, resume=FIXED, workloads=TFNORM_MODELS,
    )  # fmt: skip
    data: str | None = setting(
        None, DATA, "training file (CSV, TSV or JSONL); with "
        f"{setting_key('task', LANGUAGE_MODEL_TASK)}: UTF-8 text files, or a directory of .txt files",
        data_paths, optional=True, metavar="PATH", resume=FIXED, workloads=TFNORM_MODELS,
    )  # fmt: skip
    val_data: str | None = setting(
        None, DATA, f"validation file (same formats as {setting_key('data')})", existing_file,
        optional=True, metavar="PATH", resume=LOGGED, workloads=(CLASSIFIER,),
    )  # fmt: skip
    val_split: float | None = setting(
        None, DATA, f"without {setting_key('val_data')}, the share of {setting_key('data')} held out for "
        f"validation, split by {setting_key('seed')}; 0 for none (a file of fewer than 10 "
        f"examples is not split); with {setting_key('task', LANGUAGE_MODEL_TASK)}: the end of the text", number(0.0, below=1.0), optional=True,
        metavar="SHARE", default_text=f"{DEFAULT_VAL_SPLIT} with {setting_key('data')} alone", resume=FIXED, workloads=TFNORM_MODELS,
    )  # fmt: skip
    num_examples: int = setting(
        2048, DATA, "synthetic training examples",
        integer(1, MAX_SYNTHETIC_EXAMPLES), resume=FIXED, workloads=(CLASSIFIER,),
    )  # fmt: skip
    vocab_size: int | None = setting(
        None, DATA, "synthetic: token ids; files: vocabulary limit (counting "
        "padding and the unknown token, so at least 3)", sized("vocab_size", 3),
        optional=True, default_text=VOCAB_SIZE_DEFAULT_TEXT, resume=FIXED, workloads=(CLASSIFIER,),
    )  # fmt: skip
    num_classes: int | None = setting(
        None, DATA, f"classes of {setting_key('task', 'majority')}, or of a data file: its id "
        "labels must then be 0..num_classes-1, its name labels that many",
        integer(2), optional=True,
        default_text="3; files: max label + 1, or the number of names", resume=FIXED, workloads=(CLASSIFIER,),
    )  # fmt: skip
    max_len: int = setting(
        16, DATA, f"tokens per example; with {setting_key('task', LANGUAGE_MODEL_TASK)}: the context, in bytes",
        sized("max_len", MIN_MAX_LEN), resume=FIXED, workloads=TFNORM_MODELS,
    )  # fmt: skip
    windows: str = setting(
        "sequential", DATA, f"with {setting_key('task', LANGUAGE_MODEL_TASK)}: sequential (the text cut into "
        "windows one after the other, visited in a seeded order) or random (each window starts at a seeded "
        "random byte, so the model sees every offset)", choice(WINDOW_ORDERS), resume=FIXED, workloads=(LANGUAGE_MODEL,),
    )  # fmt: skip

"""What `TrainConfig` is declared with and fills in: the settings' groups
(the sections of `tfnorm train --help`), the bounds and readers its
declarations share, and the defaults derived from other settings, filled
once in `resolve()`.

No TensorFlow at import time.
"""

from __future__ import annotations

import os

from tfnorm._errors import setting_key
from tfnorm.limits import MODEL_SIZE_LIMITS
from tfnorm.settings.readers import integer

# The shortest sequence: the synthetic tasks compare two tokens, and a text
# model seeing one token could learn no relation between words.
MIN_MAX_LEN = 2
# The share of `data` held out for validation when no `val_data` is given.
DEFAULT_VAL_SPLIT = 0.1
# Synthetic examples are generated in memory, in Python.
MAX_SYNTHETIC_EXAMPLES = 2**24
# The synthetic tasks' smallest default vocabulary, and the vocabulary limit
# of data files, when `vocab_size` is left out (`default_vocab_size`).
SYNTHETIC_VOCAB = 16
FILE_VOCAB = 20000
#: `vocab_size`'s default as `--help` shows it.
VOCAB_SIZE_DEFAULT_TEXT = (
    f"max({SYNTHETIC_VOCAB}, 2*max_len+1) for tasks, {FILE_VOCAB} for files"
)

DATA = (
    f"data (give {setting_key('task')} or {setting_key('data')}, or "
    f"{setting_key('model_fn')} with {setting_key('data_fn')})"
)
YOUR_MODEL = "your own model (instead of tfnorm's classifier)"
MODEL = "model"
OPTIMISATION = "optimisation"
RUNTIME = "runtime"
#: The dropout of tfnorm's own models when `dropout_rate` is left out.
DEFAULT_DROPOUT_RATE = 0.1
OUTPUTS = "outputs"
POSITIVE = integer(1)


def sized(key, minimum=1):
    """A model size, up to its bound in `tfnorm.limits` (shared with the
    recipe `tfnorm generate` reads)."""
    return integer(minimum, MODEL_SIZE_LIMITS[key])


NON_NEGATIVE = integer(0)


def default_vocab_size(data, max_len):
    """The classifier's vocabulary when `vocab_size` is left out: the limit
    of a data file's vocabulary (`data` given), or the token ids of a
    synthetic task of sequences of `max_len` (room for sequences without
    repeats). The one place this default is computed."""
    return FILE_VOCAB if data else max(SYNTHETIC_VOCAB, 2 * max_len + 1)


def fill_derived_defaults(values):
    """The defaults that follow from other settings, filled in `values` once:
    what the run, its identity and `--print-config` all read."""
    if values["dff"] is None and values["model_fn"] is None:
        values["dff"] = 4 * values["d_model"]
    own_model = values["model_fn"] is not None
    if values["dropout_rate"] is None and values["init_from"] is None and not own_model:
        # With `init_from` left None: the checkpoint's own dropout (Llama's
        # 0, GPT-2's 0.1), as its library would fine-tune it.
        values["dropout_rate"] = DEFAULT_DROPOUT_RATE
    if values["checkpoint_dir"] is None:
        values["checkpoint_dir"] = os.path.join(values["logdir"], "checkpoints")
    if (
        values["model_fn"] is None
        and values["task"] is not None
        and values["num_classes"] is None
    ):
        values["num_classes"] = 3
    if values["data"] and not values["val_data"] and values["val_split"] is None:
        values["val_split"] = DEFAULT_VAL_SPLIT

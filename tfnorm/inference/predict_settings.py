"""`PredictSettings`: the settings of `tfnorm predict`, declared once.

As `GenerateSettings` for `tfnorm generate`: the flags are generated from
these declarations (`tfnorm.cli.flags`) and read by the same readers as a
Python value. The run directory, the texts and `--file` are the command's
input, not settings. No TensorFlow at import time.
"""

from __future__ import annotations

import dataclasses

from tfnorm.inference.readers import bounded
from tfnorm.settings.declared import DeclaredSettings
from tfnorm.settings.readers import boolean
from tfnorm.settings.setting import setting

OUTPUT = "output"


@dataclasses.dataclass
class PredictSettings(DeclaredSettings):
    """How `tfnorm predict` runs the model and prints (see `tfnorm predict --help`)."""

    batch_size: int = setting(
        256, OUTPUT, "texts per model call",
        bounded(int, "a positive integer", lambda n: n >= 1), metavar="N",
    )  # fmt: skip
    json: bool = setting(
        False, OUTPUT, "print one JSON object per line", boolean,
        flags=("--json",), action="store_true",
    )  # fmt: skip

    SETTING_NOUN = "prediction setting"

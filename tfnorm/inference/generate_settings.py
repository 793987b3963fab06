"""`GenerateSettings`: the settings of `tfnorm generate`, declared once.

Each field carries a `tfnorm.settings.setting.Setting`, as `tfnorm train`'s
and `tfnorm compare`'s do: the command's flags are generated from them
(`tfnorm.cli.flags`), and a flag's string is read by the same reader as a
Python value, so `--top-k 0` and `top_k=0` get the same error. The run
directory, the prompts and `--file` are the command's input, not settings.

No TensorFlow at import time: `tfnorm generate --help` is built from here.
"""

from __future__ import annotations

import dataclasses

from tfnorm._errors import setting_key
from tfnorm.inference.readers import bounded, texts
from tfnorm.settings.config_error import ConfigError
from tfnorm.settings.declared import DeclaredSettings
from tfnorm.settings.readers import boolean
from tfnorm.settings.setting import setting

SAMPLING = "sampling"
OUTPUT = "output"


@dataclasses.dataclass
class GenerateSettings(DeclaredSettings):
    """How `tfnorm generate` samples and prints (see `tfnorm generate --help`).

    The sampling settings are `TextGenerator.complete`'s arguments, by the
    same names; `resolve()` checks each, and refuses `top_k` with `top_p`.
    """

    max_new_tokens: int | None = setting(
        None, SAMPLING, "bytes to add to each prompt", bounded(int, "at least 1", lambda n: n >= 1),
        optional=True, metavar="N", default_text="up to the model's context",
    )  # fmt: skip
    temperature: float = setting(
        1.0, SAMPLING, "divides the logits before sampling; 0 for the likeliest byte",
        bounded(float, "a number >= 0", lambda t: t >= 0), metavar="T",
    )  # fmt: skip
    top_k: int | None = setting(
        None, SAMPLING, f"sample among the K likeliest bytes (K >= 1; not with {setting_key('top_p')})",
        bounded(int, "an integer >= 1", lambda k: k >= 1), optional=True, metavar="K",
    )  # fmt: skip
    top_p: float | None = setting(
        None, SAMPLING, "sample among the likeliest bytes whose probability reaches P "
        f"(0 < P <= 1; not with {setting_key('top_k')})",
        bounded(float, "a number in (0, 1]", lambda p: 0 < p <= 1), optional=True, metavar="P",
    )  # fmt: skip
    num_samples: int = setting(
        1, SAMPLING, "continuations of each prompt, with seeds S, S+1, ...",
        bounded(int, "at least 1", lambda n: n >= 1), metavar="N",
    )  # fmt: skip
    stop: tuple = setting(
        (), SAMPLING, "end a continuation after TEXT (repeatable; the end-of-text byte always ends one)",
        texts, action="append", metavar="TEXT",
    )  # fmt: skip
    seed: int | None = setting(
        None, SAMPLING, "seed of the sampling", bounded(int, "an integer"), optional=True,
        metavar="S", default_text="a random one",
    )  # fmt: skip
    json: bool = setting(
        False, OUTPUT, "print one JSON object per line", boolean,
        flags=("--json",), action="store_true",
    )  # fmt: skip

    SETTING_NOUN = "generation setting"

    def _finish(self, values):
        top_k, top_p = values["top_k"], values["top_p"]
        if top_k is not None and top_p is not None:
            raise ConfigError(
                "top_k",
                f"{setting_key('top_k')} and {setting_key('top_p')} choose two "
                f"different samplers; give one. Received: {setting_key('top_k')}="
                f"{top_k}, {setting_key('top_p')}={top_p:g}",
            )

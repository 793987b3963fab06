"""`Setting`: how one training setting is documented, read and checked.

`TrainConfig` declares each of its fields with `setting(...)`; the command
line's parser is generated from those declarations, and every value, a
flag's string, a config file's YAML/JSON value or a notebook's Python value,
goes through the one `Setting.parse`. So `learning_rate: 1e-3` (a string to
YAML 1.1) is read like `--learning-rate 1e-3`, and a bad value gets the same
error from either.

The readers below take `(key, value)` and return the value converted and
checked, or raise `ValueError` naming the key and the value. This module
must not import TensorFlow: `tfnorm train --help` is built from it.
"""

from __future__ import annotations

import dataclasses
import os
import re

from tfnorm._checks import (
    check_choice,
    check_int,
    check_number,
    is_real,
    precision_mode,
)
from tfnorm._errors import KeyedMessage
from tfnorm.choices import NORM_NAMES, spelled_out

# Counts and sizes become TensorFlow int32 shapes and step counters.
INT32_MAX = 2**31 - 1


# What a resumed run may do with a setting (`Setting.resume`).
FIXED = "fixed"
LOGGED = "logged when changed"
FREE = "free"
# The models a setting applies to (`Setting.scope`).
ANY_MODEL = "any model"
CLASSIFIER = "tfnorm's classifier"
MODEL_FN_ONLY = "a model_fn model"
LANGUAGE_MODEL = "tfnorm's language model"


class ConfigError(KeyedMessage, ValueError):
    """A setting has a bad value; `key` is the config key it belongs to.
    Other settings the message names are marked with `setting_key`."""

    def __init__(self, key, message):
        super().__init__(message)
        self.key = key


@dataclasses.dataclass(frozen=True)
class Setting:
    """The declaration of one `TrainConfig` field.

    Attributes:
        group: the `--help` section.
        help: the flag's help text, without the default. Here, in `group`
            and in `default_text`, other settings are named by key, marked
            with `tfnorm._errors.setting_key`; the command line shows flags.
        read: `read(key, value)`, one of this module's readers.
        optional: None (YAML `null`, the flag value `none`) is accepted.
        off: further values that mean None (`clipnorm`'s 0 and "off").
        default_text: the default as `--help` shows it, for derived defaults.
        metavar, flags, action: for argparse; `flags` replaces `--the-key`.
        resume: for a `TrainConfig` setting, what a resumed run may do with
            it: `FIXED` (must equal the checkpoint's), `LOGGED` (may change,
            and the change is logged) or `FREE` (where and how often the run
            writes; may change silently).
        scope: for a `TrainConfig` setting, the models it applies to:
            `ANY_MODEL`, `CLASSIFIER` (tfnorm's classifier only: refused
            with `model_fn`), `MODEL_FN_ONLY` (a `model_fn` model only)
            or `LANGUAGE_MODEL` (the decoder of `task` "lm" only).
    """

    group: str
    help: str
    read: object
    optional: bool = False
    off: tuple = ()
    default_text: str | None = None
    metavar: str | None = None
    flags: tuple = ()
    action: str | None = None
    resume: str | None = None
    scope: str | None = None

    def parse(self, key, value):
        """`value` checked and converted, or raises `ConfigError` naming `key`."""
        if isinstance(value, str) and value.strip().lower() in ("none", "null"):
            value = None
        if self.optional and (value is None or _is_off(value, self.off)):
            return None
        try:
            return self.read(key, value)
        except ValueError as error:
            raise ConfigError(key, str(error)) from None

    @property
    def choices(self):
        return getattr(self.read, "choices", None)


def setting(default, group, help, read, **options):
    """A dataclass field declared by a `Setting` (see `TrainConfig`)."""
    if getattr(read, "choices", None) and "metavar" not in options:
        options["metavar"] = "{" + ",".join(read.choices) + "}"
    return dataclasses.field(
        default=default, metadata={"setting": Setting(group, help, read, **options)}
    )


def setting_of(field):
    """The `Setting` declared on a dataclass field."""
    return field.metadata["setting"]


def _is_off(value, off):
    if isinstance(value, str):
        value = value.strip().lower()
    elif is_real(value):
        value = float(value)
    # `False == 0`, but only an "off" list naming False means YAML's `off`.
    return any(
        value == o and isinstance(value, bool) == isinstance(o, bool) for o in off
    )


# ----------------------------------------------------------------- readers


def integer(minimum, maximum=INT32_MAX):
    def read(key, value):
        if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            value = int(value)
        return check_int(key, value, minimum=minimum, maximum=maximum)

    return read


def number(minimum=None, maximum=None, *, above=None, below=None):
    def read(key, value):
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        return check_number(key, value, minimum, maximum, above=above, below=below)

    return read


def choice(choices):
    def read(key, value):
        return check_choice(key, value, choices)

    read.choices = tuple(choices)
    return read


def boolean(key, value):
    words = {"true": True, "yes": True, "false": False, "no": False}
    if isinstance(value, str) and value.strip().lower() in words:
        return words[value.strip().lower()]
    if not isinstance(value, bool):
        raise ValueError(f"`{key}` must be true or false. Received: {key}={value!r}")
    return value


def name_list(key, value):
    """A non-empty list of names, or one comma-separated string of them."""
    if isinstance(value, str):
        value = [name.strip() for name in value.split(",") if name.strip()]
    if (
        not isinstance(value, (list, tuple))
        or not value
        or not all(isinstance(name, str) and name for name in value)
    ):
        raise ValueError(
            f"`{key}` must be a non-empty list of names such as "
            f"['/gpu:0', '/gpu:1']. Received: {key}={value!r}"
        )
    return list(value)


# A TensorFlow device name as `tf.DeviceSpec` spells it: `/gpu:0`, `GPU:1`,
# `/device:CPU:0`, `/job:worker/replica:0/task:1/device:GPU:0`. Anything else
# (a newline, a space, a second name glued on) would reach TensorFlow, which
# hangs or fails far from the flag.
_DEVICE = re.compile(
    r"(/job:[A-Za-z0-9_-]+)?(/replica:[0-9]+)?(/task:[0-9]+)?"
    r"/?(device:)?[A-Za-z_]+:[0-9]+"
)


def device_list(key, value):
    """A `name_list` of TensorFlow device names (`/gpu:0`, `/cpu:1`, ...)."""
    names = name_list(key, value)
    for name in names:
        if not _DEVICE.fullmatch(name):
            raise ValueError(
                f"`{key}` must list device names such as /gpu:0 or /cpu:1, "
                f"separated by commas; {name!r} is not one. Received: "
                f"{key}={value!r}"
            )
    return names


def existing_file(key, value):
    path = _path(key, value)
    if not os.path.isfile(path):
        reason = "it is a directory" if os.path.isdir(path) else "no such file"
        if os.path.exists(path) and not os.path.isdir(path):
            # Never opened: reading a FIFO would wait for a writer forever.
            reason = "it is not a regular file (a FIFO or a device)"
        raise ValueError(
            f"`{key}` must name a file ({reason}). Received: {key}={value!r}"
        )
    try:
        with open(path, "rb"):
            pass
    except OSError as error:
        raise ValueError(
            f"`{key}` cannot be read: {error.strerror or error}. "
            f"Received: {key}={value!r}"
        ) from None
    return path


def data_paths(key, value):
    """A file; or, for a language model, several files or a directory (the
    checks across settings refuse those for the classifier). One path in a
    list is that path."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise ValueError(f"`{key}` must name a file. Received: {key}={value!r}")
    paths = [_path(key, one) for one in values]
    for path in paths:
        if not os.path.isdir(path):
            existing_file(key, path)
    return paths[0] if len(paths) == 1 else paths


data_paths.many = True


def creatable(kind):
    """A `kind` ("directory" or "file") path that exists as one or can be created.

    Checked before anything is written, so a run that cannot write its
    outputs fails with the setting's name instead of a traceback.
    """

    def read(key, value):
        path = _path(key, value)
        other = "file" if kind == "directory" else "directory"
        if os.path.exists(path) and os.path.isdir(path) != (kind == "directory"):
            raise ValueError(
                f"`{key}` must be a {kind}, but {path!r} is a {other}. "
                f"Received: {key}={value!r}"
            )
        ancestor = os.path.dirname(os.path.abspath(path))
        while not os.path.exists(ancestor):
            ancestor = os.path.dirname(ancestor)
        if not os.path.isdir(ancestor) or not os.access(ancestor, os.W_OK | os.X_OK):
            problem = "a file" if not os.path.isdir(ancestor) else "not writable"
            raise ValueError(
                f"`{key}` cannot be created: {ancestor!r} is {problem}. "
                f"Received: {key}={value!r}"
            )
        return path

    return read


def hf_checkpoint(key, value):
    """A tfnorm language-model run (its `language_model.json`), or a Hugging
    Face causal-LM checkpoint directory, by its `config.json`
    (read here, without TensorFlow: an unknown `model_type` is refused
    before anything runs)."""
    path = _path(key, value)
    if os.path.isfile(os.path.join(path, "language_model.json")):
        return path  # a tfnorm language-model run, read when the run loads
    if not os.path.isfile(os.path.join(path, "config.json")):
        reason = "no such directory" if not os.path.isdir(path) else "no config.json"
        raise ValueError(
            f"`{key}` must name a Hugging Face checkpoint directory or a tfnorm "
            f"language-model run ({reason}). Received: {key}={value!r}"
        )
    from tfnorm.checkpoints.errors import CheckpointError
    from tfnorm.checkpoints.hf_config import HFConfig

    try:
        model_type = HFConfig.read(path).model_type
    except CheckpointError as error:
        raise ValueError(f"`{key}`: {error} Received: {key}={value!r}") from None
    if model_type == "bert":
        raise ValueError(
            f"`{key}` must be a causal language model (llama, mistral, qwen2, "
            f"gpt2); {path} holds a bert encoder. Received: {key}={value!r}"
        )
    return path


#: `bpe:N`'s bounds: the 256 byte symbols and one end-of-text token, and
#: ids that stay a small embedding table.
BPE_SIZES = (257, 2**20)


def tokenizer_spec(key, value):
    """`bytes`, `bpe:N` (N in `BPE_SIZES`) or the path of a tokenizer.json
    (or of a directory holding one)."""
    if value == "bytes":
        return value
    if isinstance(value, str) and value.startswith("bpe:"):
        low, high = BPE_SIZES
        size = value[4:]
        if not size.isdigit() or not low <= int(size) <= high:
            raise ValueError(
                f"`{key}` bpe:N needs a whole N in [{low}, {high}] (the token "
                f"ids of the byte-level BPE). Received: {key}={value!r}"
            )
        return f"bpe:{int(size)}"
    path = _path(key, value)
    found = path if os.path.basename(path) == "tokenizer.json" else None
    found = found or os.path.join(path, "tokenizer.json")
    if not os.path.isfile(found):
        raise ValueError(
            f"`{key}` must be bytes, bpe:N, or a tokenizer.json or a directory "
            f"holding one (no such file: {found}). Received: {key}={value!r}"
        )
    return path


def _path(key, value):
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise ValueError(f"`{key}` must be a non-empty path. Received: {key}={value!r}")
    return value


def norm_spec(key, value):
    """A norm name or layer config, by its form only: `resolve` asks
    `get_norm` (importing the layers)."""
    if not isinstance(value, (str, dict)) or not value:
        raise ValueError(
            f"`{key}` must be a norm name ({spelled_out(NORM_NAMES)}) or a layer "
            f"config dict. Received: {key}={value!r}"
        )
    return value


def function_spec(key, value):
    """`MODULE:FUNCTION`, by its form only: `train` imports the module
    (running user code)."""
    if not isinstance(value, str) or ":" not in value.strip(":"):
        raise ValueError(
            f"`{key}` must be MODULE:FUNCTION (a module name or path/to/file.py, "
            f"then the function's name). Received: {key}={value!r}"
        )
    return value.strip()


def loss_name(key, value):
    """The name of a Keras loss (looked up when the model is compiled)."""
    if not isinstance(value, str) or not value.strip().isidentifier():
        raise ValueError(
            f"`{key}` must be the name of a Keras loss, e.g. "
            f"sparse_categorical_crossentropy. Received: {key}={value!r}"
        )
    return value.strip()


def precision(key, value):
    """A mixed-precision mode (`tfnorm._checks.precision_mode`)."""
    return precision_mode(value, name=key)


def keys_declared(config_class, **declared):
    """The field names of `config_class` whose `Setting` has the given
    attributes (`keys_declared(TrainConfig, resume=FIXED)`), in field order."""
    return tuple(
        field.name
        for field in dataclasses.fields(config_class)
        if all(getattr(setting_of(field), k) == v for k, v in declared.items())
    )

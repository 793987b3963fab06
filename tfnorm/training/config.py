"""`TrainConfig`: every setting of a `tfnorm train` run, validated in one place.

The CLI, config files (YAML or JSON) and notebooks all end up here, so a bad
value gets the same error whichever way it came in. Field names are the
config-file keys; the matching flag is the name with `-` for `_`
(`learning_rate` is `--learning-rate`).
"""

from __future__ import annotations

import dataclasses
import json
import os

from tfnorm._checks import is_int, is_real
from tfnorm.distribute import KINDS as STRATEGIES
from tfnorm.models.encoder_block import NORM_POSITIONS
from tfnorm.models.text_layers import POOLINGS
from tfnorm.training.data import SYNTHETIC_TASKS
from tfnorm.training.optimizers import OPTIMIZERS
from tfnorm.training.precision import MODES
from tfnorm.training.schedules import DECAYS

# The choices each setting accepts, from the modules that implement them (the
# CLI's --help lists these). The config always names a precision mode.
MIXED_PRECISION_MODES = tuple(mode for mode in MODES if mode is not None)

# Settings that fix the shapes of the checkpointed variables or the meaning of
# the saved data position: a resumed run must agree with its checkpoint on all.
RESUME_KEYS = (
    "task",
    "data",
    "num_examples",
    "vocab_size",
    "num_classes",
    "max_len",
    "num_layers",
    "d_model",
    "num_heads",
    "dff",
    "norm",
    "norm_position",
    "pooling",
    "optimizer",
    "mixed_precision",
    "batch_size",
    "seed",
)


class ConfigError(ValueError):
    """A setting has a bad value; `key` is the config key it belongs to."""

    def __init__(self, key, message):
        super().__init__(message)
        self.key = key


@dataclasses.dataclass
class TrainConfig:
    """Settings of one training run (see `tfnorm train --help` for each).

    Build one from keywords or a dict (`TrainConfig.from_dict`); `validate()`
    checks every value and fills the derived defaults.
    """

    # Data: a synthetic task or files.
    task: str | None = None
    data: str | None = None
    val_data: str | None = None
    num_examples: int = 2048
    vocab_size: int | None = None
    num_classes: int = 3
    max_len: int = 16
    # Model.
    num_layers: int = 2
    d_model: int = 64
    num_heads: int = 4
    dff: int | None = None
    norm: str = "layer"
    norm_position: str = "pre"
    pooling: str = "mean"
    dropout_rate: float = 0.1
    epsilon: float | None = None
    # Optimisation.
    optimizer: str = "adamw"
    learning_rate: float = 1e-3
    warmup_steps: int = 0
    decay: str = "cosine"
    weight_decay: float = 0.01
    clipnorm: float | None = 1.0
    epochs: int = 1
    steps_per_epoch: int | None = None
    batch_size: int = 32
    # Runtime.
    strategy: str = "auto"
    devices: list | None = None
    mixed_precision: str = "float32"
    seed: int = 0
    # Outputs.
    logdir: str = "runs/tfnorm"
    checkpoint_dir: str | None = None
    checkpoint_every: int = 100
    keep_checkpoints: int = 3
    log_every: int = 10
    histogram_every: int = 100
    log_file: str | None = None
    export: bool = True

    @classmethod
    def from_dict(cls, values):
        """A config from a dict such as a parsed YAML/JSON file; unknown keys fail."""
        if not isinstance(values, dict):
            raise ConfigError(
                None,
                "A training config must be a mapping of settings. "
                f"Received: {type(values).__name__}",
            )
        known = {field.name for field in dataclasses.fields(cls)}
        for key in values:
            normalised = str(key).replace("-", "_")
            if normalised not in known:
                raise ConfigError(
                    key,
                    f"Unknown training setting {key!r}; known settings: "
                    f"{', '.join(sorted(known))}. Received: {key}={values[key]!r}",
                )
        return cls(**{str(k).replace("-", "_"): v for k, v in values.items()})

    def to_dict(self):
        return dataclasses.asdict(self)

    def validate(self):
        """Checks every setting and fills derived defaults; returns self."""
        if (self.task is None) == (self.data is None):
            raise ConfigError(
                "task",
                "Give exactly one data source: a synthetic task (task / --task, "
                f"one of {SYNTHETIC_TASKS}) or a file (data / --data). "
                f"Received: task={self.task!r}, data={self.data!r}",
            )
        if self.task is not None:
            _choice(self, "task", SYNTHETIC_TASKS)
        if self.val_data is not None and self.data is None:
            raise ConfigError(
                "val_data",
                "val_data (--val-data) needs data (--data); synthetic tasks make "
                f"their own validation set. Received: val_data={self.val_data!r}",
            )
        for key in ("data", "val_data"):
            path = getattr(self, key)
            if path is not None and not os.path.isfile(str(path)):
                raise ConfigError(key, f"No such file. Received: {key}={path!r}")
        for key in (
            "num_examples",
            "num_classes",
            "max_len",
            "num_layers",
            "d_model",
            "num_heads",
            "epochs",
            "batch_size",
            "checkpoint_every",
            "keep_checkpoints",
            "log_every",
        ):
            _positive_int(self, key)
        for key in ("vocab_size", "dff", "steps_per_epoch"):
            if getattr(self, key) is not None:
                _positive_int(self, key)
        _non_negative_int(self, "warmup_steps")
        _non_negative_int(self, "seed")
        _non_negative_int(self, "histogram_every")
        if not isinstance(self.export, bool):
            raise ConfigError(
                "export",
                f"export must be true or false. Received: export={self.export!r}",
            )
        if self.d_model % self.num_heads:
            raise ConfigError(
                "d_model",
                "d_model must be divisible by num_heads. Received: "
                f"d_model={self.d_model}, num_heads={self.num_heads}",
            )
        _choice(self, "norm_position", NORM_POSITIONS)
        _choice(self, "pooling", POOLINGS)
        _choice(self, "optimizer", OPTIMIZERS)
        _choice(self, "decay", DECAYS)
        _choice(self, "strategy", STRATEGIES)
        if isinstance(self.devices, str):
            self.devices = [d.strip() for d in self.devices.split(",") if d.strip()]
        if self.devices is not None and (
            not isinstance(self.devices, (list, tuple))
            or not self.devices
            or not all(isinstance(d, str) for d in self.devices)
        ):
            raise ConfigError(
                "devices",
                "devices must be a non-empty list of device names such as "
                f"['/gpu:0', '/gpu:1']. Received: devices={self.devices!r}",
            )
        if self.mixed_precision in (None, "none", "off", "no"):
            self.mixed_precision = "float32"
        self.mixed_precision = {
            "mixed_float16": "float16",
            "mixed_bfloat16": "bfloat16",
        }.get(self.mixed_precision, self.mixed_precision)
        _choice(self, "mixed_precision", MIXED_PRECISION_MODES)
        if not isinstance(self.norm, (str, dict)):
            raise ConfigError(
                "norm",
                "norm must be a norm name (layer, rms, scale) or a config dict. "
                f"Received: norm={self.norm!r}",
            )
        from tfnorm.layers import get_norm

        try:
            get_norm(self.norm)
        except (ValueError, TypeError) as error:
            raise ConfigError("norm", f"{error} Received: norm={self.norm!r}") from None
        _positive_float(self, "learning_rate")
        _non_negative_float(self, "weight_decay")
        if self.clipnorm is not None:
            _positive_float(self, "clipnorm")
        if self.epsilon is not None:
            _positive_float(self, "epsilon")
        _non_negative_float(self, "dropout_rate")
        if not self.dropout_rate < 1:
            raise ConfigError(
                "dropout_rate",
                f"dropout_rate must be in [0, 1). Received: dropout_rate={self.dropout_rate}",
            )
        if self.dff is None:
            self.dff = 4 * self.d_model
        if self.checkpoint_dir is None:
            self.checkpoint_dir = os.path.join(str(self.logdir), "checkpoints")
        return self


def flag_name(key):
    """The command-line flag for a config key: `learning_rate` -> `--learning-rate`."""
    return "--" + str(key).replace("_", "-")


def load_config_file(path):
    """Reads a YAML or JSON config file into a dict (YAML for .yaml/.yml)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ConfigError("config", f"No such config file. Received: --config={path!r}")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if path.lower().endswith((".yaml", ".yml")):
        import yaml

        try:
            values = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ConfigError("config", f"{path}: not valid YAML ({error})") from None
    else:
        try:
            values = json.loads(text)
        except ValueError as error:
            raise ConfigError("config", f"{path}: not valid JSON ({error})") from None
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise ConfigError(
            "config",
            f"{path}: a config file must hold a mapping of settings. "
            f"Received: {type(values).__name__}",
        )
    return values


def _positive_int(config, key):
    value = getattr(config, key)
    if not is_int(value) or value < 1:
        raise ConfigError(
            key, f"{key} must be an integer >= 1. Received: {key}={value!r}"
        )


def _non_negative_int(config, key):
    value = getattr(config, key)
    if not is_int(value) or value < 0:
        raise ConfigError(
            key, f"{key} must be an integer >= 0. Received: {key}={value!r}"
        )


def _positive_float(config, key):
    value = getattr(config, key)
    if not is_real(value) or value <= 0:
        raise ConfigError(key, f"{key} must be a number > 0. Received: {key}={value!r}")
    setattr(config, key, float(value))


def _non_negative_float(config, key):
    value = getattr(config, key)
    if not is_real(value) or value < 0:
        raise ConfigError(
            key, f"{key} must be a number >= 0. Received: {key}={value!r}"
        )
    setattr(config, key, float(value))


def _choice(config, key, choices):
    value = getattr(config, key)
    if value not in choices:
        raise ConfigError(
            key, f"{key} must be one of {', '.join(choices)}. Received: {key}={value!r}"
        )

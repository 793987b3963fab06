"""`Setting`: how one setting is documented, read and checked.

A settings dataclass (`TrainConfig`, `CompareConfig`, ...) declares each of
its fields with `setting(...)`; the command line's parser is generated from
those declarations, and every value, a flag's string, a config file's
YAML/JSON value or a notebook's Python value, goes through the one
`Setting.parse`. So `learning_rate: 1e-3` (a string to YAML 1.1) is read
like `--learning-rate 1e-3`, and a bad value gets the same error from
either.

This module must not import TensorFlow: `--help` is built from it.
"""

from __future__ import annotations

import dataclasses

from tfnorm._checks import is_real
from tfnorm.settings.config_error import ConfigError

# What a resumed run may do with a setting (`Setting.resume`).
FIXED = "fixed"
LOGGED = "logged when changed"
FREE = "free"


@dataclasses.dataclass(frozen=True)
class Setting:
    """The declaration of one field of a settings dataclass (`TrainConfig`,
    `CompareConfig`, `PredictSettings`, `GenerateSettings`).

    Attributes:
        group: the `--help` section.
        help: the flag's help text, without the default. Here, in `group`
            and in `default_text`, other settings are named by key, marked
            with `tfnorm._errors.setting_key`; the command line shows flags.
        read: `read(key, value)`, a reader (`tfnorm.settings.readers`, or
            a package's own: `tfnorm.training.config.readers`, ...).
        optional: None (YAML `null`, the flag value `none`) is accepted.
        off: further values that mean None (`clipnorm`'s 0 and "off").
        default_text: the default as `--help` shows it, for derived defaults.
        metavar, flags, action: for argparse; `flags` replaces `--the-key`.
        resume: for a `TrainConfig` setting, what a resumed run may do with
            it: `FIXED` (must equal the checkpoint's), `LOGGED` (may change,
            and the change is logged) or `FREE` (where and how often the run
            writes; may change silently).
        workloads: the workloads that read the setting, by the names the
            settings class gives them (`TrainConfig`: tfnorm's classifier,
            its language model, the user's `model_fn` model;
            `CompareConfig`: its tasks); None: every workload, or a class
            without workloads. A value other than the default given
            to a workload not named here is refused (`unread_given`), and a
            resumed run compares only the settings its workload reads.
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
    workloads: tuple | None = None

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


def keys_declared(config_class, **declared):
    """The field names of `config_class` whose `Setting` has the given
    attributes (`keys_declared(TrainConfig, resume=FIXED)`), in field order."""
    return tuple(
        field.name
        for field in dataclasses.fields(config_class)
        if _declares(setting_of(field), declared)
    )


def _declares(setting, declared):
    return all(getattr(setting, key) == value for key, value in declared.items())


def reads(setting, workload):
    """Whether the workload named `workload` reads `setting` (a `Setting`)."""
    return setting.workloads is None or workload in setting.workloads


def keys_read_by(config_class, workload, **declared):
    """The field names of `config_class` that `workload` reads and whose
    `Setting` has the given attributes, in field order."""
    return tuple(
        field.name
        for field in dataclasses.fields(config_class)
        if _declares(setting_of(field), declared) and reads(setting_of(field), workload)
    )


def unread_given(config_class, values, workload):
    """The first field of `config_class` given a value in `values` other than
    its default that `workload` does not read, or None: a setting that would
    be silently ignored."""
    for field in dataclasses.fields(config_class):
        if values[field.name] != field.default and not reads(
            setting_of(field), workload
        ):
            return field
    return None

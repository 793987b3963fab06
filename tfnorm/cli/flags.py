"""Command-line flags generated from a dataclass of declared settings.

A settings dataclass (`tfnorm.experiments.warmup_settings.CompareConfig`;
`tfnorm.training.config.train_config.TrainConfig` is declared the same way) declares each
field with `tfnorm.training.config.settings.setting(...)`. `add_setting_flags`
turns the declarations into argparse flags that keep the raw strings
(`argument_default=SUPPRESS`: a flag not given is absent), so the values are
read and checked by the setting's own reader, the same code that checks a
notebook's Python value, and a bad one is reported by `fail` on one line.

This module must not import TensorFlow: `--help` is built from it.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from tfnorm.training.config.settings import setting_of


def flag_name(key):
    """The command-line flag for a setting: `learning_rate` -> `--learning-rate`."""
    return "--" + str(key).replace("_", "-")


def flags_of(field):
    """The flags of a settings-dataclass field, the first one its canonical name."""
    return setting_of(field).flags or (flag_name(field.name),)


def add_setting_flags(parser, config_class, skip=()):
    """Adds one flag per field of `config_class`, grouped by `Setting.group`.

    Fields whose reader has `many = True` or whose default is a tuple take
    one or more values (`--seeds 0 1 2`); their reader receives the list. Fields named in `skip` get no flag.

    Returns:
        `{group name: argparse group}`, for adding further flags.
    """
    groups = {}
    for field in dataclasses.fields(config_class):
        if field.name in skip:
            continue
        setting = setting_of(field)
        if setting.group not in groups:
            groups[setting.group] = parser.add_argument_group(setting.group)
        _add_flag(groups[setting.group], field, setting)
    return groups


def _add_flag(group, field, setting):
    flags = flags_of(field)
    if setting.action:
        group.add_argument(
            *flags,
            dest=field.name,
            action=setting.action,
            default=argparse.SUPPRESS,
            help=_escaped(setting.help),
        )
        return
    default = setting.default_text
    if default is None:
        default = field.default
        if isinstance(default, tuple):
            default = " ".join(str(value) for value in default)
        elif default is None:
            default = "none"
    # A list setting (its reader says so, or its default is a tuple) takes
    # one or more values; the reader gets the list.
    listed = getattr(setting.read, "many", False) or isinstance(field.default, tuple)
    many = {"nargs": "+"} if listed else {}
    group.add_argument(
        *flags,
        dest=field.name,
        metavar=setting.metavar,
        help=_escaped(f"{setting.help} (default: {default})"),
        **many,
    )


def _escaped(text):
    # argparse expands %-formats in help text ("30%" would fail).
    return str(text).replace("%", "%%")


def given_settings(args, config_class):
    """`{field name: raw value}` of the flags given on the command line."""
    given = {}
    for field in dataclasses.fields(config_class):
        value = getattr(args, field.name, dataclasses.MISSING)
        if value is not dataclasses.MISSING:
            given[field.name] = value
    return given


def describe(error, config_class, with_key=False):
    """A `ConfigError` as `--flag: message` when its key is a declared field;
    `with_key` adds the config-file key (`--flag (config key k): message`),
    for commands that also read settings from a file."""
    fields = {field.name: field for field in dataclasses.fields(config_class)}
    if error.key not in fields:
        return str(error)
    flag = flags_of(fields[error.key])[0]
    if with_key:
        return f"{flag} (config key {error.key}): {error}"
    return f"{flag}: {error}"


def fail(command, message):
    """Prints `tfnorm COMMAND: error: MESSAGE` on one stderr line; returns exit status 2."""
    # One line: a wrapped message would split over lines in logs.
    print(f"tfnorm {command}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return 2

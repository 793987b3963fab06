"""Command-line flags generated from a dataclass of declared settings.

A settings dataclass (`tfnorm.training.config.train_config.TrainConfig`,
`tfnorm.experiments.compare_settings.CompareConfig`,
`tfnorm.inference.predict_settings.PredictSettings`,
`tfnorm.inference.generate_settings.GenerateSettings`) declares each
field with `tfnorm.settings.setting.setting(...)`. `add_setting_flags`
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

from tfnorm._errors import KeyedMessage, named_settings
from tfnorm.settings.setting import setting_of


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
            title = with_flags(setting.group, config_class)
            groups[setting.group] = parser.add_argument_group(title)
        _add_flag(groups[setting.group], field, setting, config_class)
    return groups


def _add_flag(group, field, setting, config_class):
    flags = flags_of(field)
    if setting.action:
        # An on/off flag takes no value; a repeated one ("append") does.
        metavar = {"metavar": setting.metavar} if setting.action == "append" else {}
        group.add_argument(
            *flags,
            dest=field.name,
            action=setting.action,
            default=argparse.SUPPRESS,
            help=_escaped(with_flags(setting.help, config_class)),
            **metavar,
        )
        return
    default = setting.default_text
    if default is not None:
        default = with_flags(default, config_class)
    else:
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
        help=_escaped(f"{with_flags(setting.help, config_class)} (default: {default})"),
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


def with_flags(text, config_class, with_key=False):
    """`text` (a message or help text) with the settings it names by key
    (marked by `tfnorm._errors.setting_key`) named by their flags:
    `checkpoint_dir` -> `--checkpoint-dir`, `num_classes=3` -> `--num-classes 3`;
    an on/off flag is named alone (`export=False` -> `--no-export`).
    `with_key` keeps a key named without a value beside its flag
    (`checkpoint_dir (--checkpoint-dir)`), for commands that also read
    settings from a file."""
    fields = {field.name: field for field in dataclasses.fields(config_class)}

    def flag_of(key, value):
        field = fields.get(key)
        flag = flags_of(field)[0] if field else flag_name(key)
        if field and setting_of(field).action:
            return flag
        if value is not None:
            return f"{flag} {value}"
        return f"{key} ({flag})" if with_key else flag

    if isinstance(text, KeyedMessage):
        return text.text(flag_of)
    return named_settings(text, flag_of)


def describe(error, config_class, with_key=False):
    """An error of the library as the command line says it: the settings it
    names by key named by their flags (`with_flags`), and, for a
    `ConfigError` whose key is a declared field, opened by `--flag: `;
    `with_key` adds the config-file key (`--flag (config key k): message`),
    for commands that also read settings from a file."""
    message = with_flags(error, config_class, with_key)
    fields = {field.name: field for field in dataclasses.fields(config_class)}
    key = getattr(error, "key", None)
    if key not in fields:
        return message
    flag = flags_of(fields[key])[0]
    if with_key:
        return f"{flag} (config key {key}): {message}"
    return f"{flag}: {message}"


def fail(command, message):
    """Prints `tfnorm COMMAND: error: MESSAGE` on one stderr line; returns exit status 2."""
    # One line: a wrapped message would split over lines in logs.
    print(f"tfnorm {command}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return 2

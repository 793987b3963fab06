"""Reading a run's settings from a YAML or JSON file.

YAML 1.1 reads some integers differently from the same text given as a flag
(`010` is octal 8); such a value is refused rather than read two ways.
"""

from __future__ import annotations

import json
import os
import re

from tfnorm._errors import setting_key
from tfnorm.settings.config_error import ConfigError


def load_config_file(path, keys=()):
    """Reads a YAML or JSON config file into a dict (YAML for .yaml/.yml).

    `keys` are the settings the file may hold: a value that YAML would read
    two ways is refused naming its key when it is one of them, naming the
    file (`config`) otherwise.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        problem = "No such config file"
        if os.path.isdir(path):
            problem = "The config file is a directory"
        elif os.path.exists(path):
            problem = "The config file is not a regular file (a FIFO or device)"
        raise ConfigError(
            "config", f"{problem}. Received: {setting_key('config', repr(path))}"
        )
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as error:
        raise ConfigError(
            "config",
            f"{path} cannot be read: {error.strerror or error}. "
            f"Received: {setting_key('config', repr(path))}",
        ) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise ConfigError(
            "config", f"{path}, line {line}: not UTF-8 text ({error.reason})."
        ) from None
    try:
        if path.lower().endswith((".yaml", ".yml")):
            values = _load_yaml(path, text, keys)
        else:
            try:
                values = json.loads(text)
            except ValueError as error:
                raise ConfigError(
                    "config", f"{path}: not valid JSON ({error})"
                ) from None
    except RecursionError:
        # `[[[[...]]]]` thousands deep: the parsers recurse once per level.
        raise ConfigError(
            "config",
            f"{path}: nested too deeply to read (settings are a flat mapping "
            "of values and short lists).",
        ) from None
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise ConfigError(
            "config",
            f"{path}: a config file must hold a mapping of settings. "
            f"Received: {type(values).__name__}",
        )
    return values


# YAML 1.1 (PyYAML) reads `010` as octal 8 and `1:30` as 90 (base 60), where
# the same text as a flag is 10 (and `1:30` an error): such an integer in a
# config file is refused, naming its key, rather than read two ways.
_PLAIN_YAML_INT = re.compile(r"^[-+]?(0|[1-9][0-9_]*|0x[0-9a-fA-F_]+|0b[01_]+)$")


class _AmbiguousInt:
    def __init__(self, raw, value, line):
        self.raw, self.value, self.line = raw, value, line


def _load_yaml(path, text, keys):
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    def construct_int(loader, node):
        value = yaml.SafeLoader.construct_yaml_int(loader, node)
        raw = str(node.value).strip()
        if _PLAIN_YAML_INT.match(raw):
            return value
        return _AmbiguousInt(raw, value, node.start_mark.line + 1)

    _Loader.add_constructor("tag:yaml.org,2002:int", construct_int)
    try:
        values = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as error:
        reason = " ".join(str(error).split())
        raise ConfigError("config", f"{path}: not valid YAML ({reason})") from None
    items = values.items() if isinstance(values, dict) else [(None, values)]
    for key, value in items:
        number = _first_ambiguous(value)
        if number is not None:
            _refuse_ambiguous_int(path, key, number, keys)
    return values


def _first_ambiguous(value):
    """The first `_AmbiguousInt` in `value` (nested lists and dicts too)."""
    if isinstance(value, _AmbiguousInt):
        return value
    if isinstance(value, dict):
        value = list(value.keys()) + list(value.values())
    if isinstance(value, list):
        for item in value:
            found = _first_ambiguous(item)
            if found is not None:
                return found
    return None


def _refuse_ambiguous_int(path, key, number, keys):
    raw, where = number.raw, f"{path}, line {number.line}"
    name = str(key).replace("-", "_") if key is not None else None
    if ":" in raw:
        reading = f"the base-60 number {number.value}"
        advice = "write the number in plain digits"
    else:
        decimal = int(raw.replace("_", ""), 10)
        reading = f"octal, {number.value}, while the flag reads {decimal}"
        advice = f"write {decimal} (or {number.value}) without leading zeros"
    raise ConfigError(
        name if name in keys else "config",
        f"{where}: YAML 1.1 reads {raw} as {reading}; {advice}. "
        f"Received: {raw if key is None else f'{key}={raw}'}",
    )

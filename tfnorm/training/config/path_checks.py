"""The checks of `TrainConfig.resolve` on the paths a run writes: the log
file is appended to, so it must be neither a link, nor a data file, nor the
user's code (`same_file`, `module_file` find them however spelled).

Each failure is a `ConfigError` naming the key to change. No TensorFlow at
import time.
"""

from __future__ import annotations

import os
import sys

from tfnorm._errors import setting_key
from tfnorm.settings.config_error import ConfigError


def check_log_file(values):
    """The log file is appended to: never through a link, never a data file."""
    path = values["log_file"]
    if path is None:
        return
    if os.path.islink(path):
        raise ConfigError(
            "log_file",
            f"{path} is a symbolic link; progress lines are appended only to a "
            f"plain file, never through a link. Received: log_file={path!r}",
        )
    for key in ("data", "val_data", "model_fn", "data_fn"):
        other = values[key]
        if key in ("model_fn", "data_fn"):
            other = module_file(other)
        others = other if isinstance(other, list) else [other]
        if any(same_file(path, one) for one in others):
            what = "the data" if key in ("data", "val_data") else "your code"
            raise ConfigError(
                "log_file",
                f"log_file is the same file as {setting_key(key)}; progress "
                f"lines would be appended to {what}. Received: log_file={path!r}, "
                f"{key}={values[key]!r}",
            )


def same_file(path, other):
    """Whether `other` names the existing file `path` (however spelled or linked)."""
    try:
        return other is not None and os.path.samefile(path, other)
    except OSError:  # one of them does not exist (yet)
        return False


def module_file(spec):
    """The file of `MODULE:FUNCTION`'s module, found without importing it
    (None when it is not found, e.g. a module only a notebook defines)."""
    import importlib.machinery

    module, sep, _ = str(spec).rpartition(":")
    if not sep:
        return None
    if module.endswith(".py") or "/" in module or os.sep in module:
        return module
    search = [os.getcwd(), *sys.path]
    found = None
    try:
        for depth, _part in enumerate(module.split(".")):
            name = ".".join(module.split(".")[: depth + 1])
            found = importlib.machinery.PathFinder.find_spec(name, search)
            if found is None:
                return None
            search = found.submodule_search_locations or []
    except (ImportError, ValueError):
        return None
    return found.origin if found.has_location else None

"""The readers a `Setting` names: each takes `(key, value)` and returns the
value converted and checked, or raises `ValueError` naming the key and the
value. No TensorFlow at import time.
"""

from __future__ import annotations

import os
import re

from tfnorm._checks import check_choice, check_int, check_number

# Counts and sizes become TensorFlow int32 shapes and step counters.
INT32_MAX = 2**31 - 1


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
    path = path_value(key, value)
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


def creatable(kind):
    """A `kind` ("directory" or "file") path that exists as one or can be created.

    Checked before anything is written, so a run that cannot write its
    outputs fails with the setting's name instead of a traceback.
    """

    def read(key, value):
        path = path_value(key, value)
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


def path_value(key, value):
    """`value` as a path (a str or `os.PathLike`), or raises naming `key`."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise ValueError(f"`{key}` must be a non-empty path. Received: {key}={value!r}")
    return value

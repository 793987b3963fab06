"""Errors as tfnorm reports them: `one_line(error)`, the one line its
messages quote; settings named in a message by their key, which a command
line renames to its flags (`setting_key`, `KeyedMessage`); and which
failures of a run are not bugs (memory, a full disk)."""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Keras 3 prints the reason in bold
_RAISED = re.compile(r"^(\w+\.)*\w+(Error|Exception): ")
_NOISE = ("Graph execution error", "Detected at node")

# Encloses a setting named inside a message. The library shows the key
# (`checkpoint_dir`, `val_split=0.1`), what a notebook passes; a command line
# shows its flag. A control character no path or value holds in practice.
_MARK = "\x1e"
_MARKED = re.compile(_MARK + r"(\w+)(?:=([^" + _MARK + r"]*))?" + _MARK)


def setting_key(key, value=None):
    """A setting named inside an error message: reads `key`, or `key=value`
    when a value is given, unless the code that reports the error renames
    it (`KeyedMessage.text`)."""
    if value is None:
        return f"{_MARK}{key}{_MARK}"
    return f"{_MARK}{key}={value}{_MARK}"


def _as_key(key, value):
    return key if value is None else f"{key}={value}"


def named_settings(text, name=_as_key):
    """`text` with each setting marked by `setting_key` written by
    `name(key, value)` (value None when none was given); by default as the
    key, or `key=value`."""
    return _MARKED.sub(lambda match: name(match.group(1), match.group(2)), str(text))


class KeyedMessage:
    """Mixin for an error whose message names settings with `setting_key`:
    `str(error)` names them by key, `error.text(name)` as the caller likes."""

    def __str__(self):
        return named_settings(super().__str__())

    def text(self, name):
        """The message with each marked setting written by `name(key, value)`."""
        return named_settings(super().__str__(), name)


def one_line(error, *, limit=300, with_type=True):
    """`error` as one short line: its reason, without the noise around it.

    TensorFlow wraps a reason in the op's name (`{{function_node ...}}`,
    `[Op:SaveV2]`) and, in graph mode, in the Python stack of the op; an
    error raised while tracing a `tf.function` quotes the original error
    after the user-code stack, and Keras 3 adds the arguments the layer
    received. Only the reason is kept: the unindented lines, from the last
    quoted error on, up to the arguments, joined by spaces.

    Args:
        error: the exception.
        limit: the most characters returned; a longer reason ends in "...".
        with_type: whether the line opens with the error's class name.
    """
    lines = _ANSI.sub("", str(error)).strip().splitlines()
    quoted = [i for i, line in enumerate(lines) if _RAISED.match(line.strip())]
    if quoted:
        lines = lines[quoted[-1] :]
        lines[0] = _RAISED.sub("", lines[0].strip())
    kept = []
    for line in lines:
        if line.startswith("Arguments received"):
            break
        if line.strip() and not line[0].isspace() and not line.startswith(_NOISE):
            kept.append(line.strip())
    text = " ".join(" ".join(kept).split()) or " ".join(str(error).split())
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", text)
    text = re.sub(r"\s*\[Op:\w+\]$", "", text)
    if with_type:
        text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    text = text or "(no message)"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# What TensorFlow's writers (TensorBoard events in the logdir) say when the
# disk is full, read-only or not theirs; they raise `tf.errors.OpError`, not
# `OSError`.
_OUTPUT_ERRORS = (
    "No space left on device",
    "Disk quota exceeded",
    "Read-only file system",
    "Permission denied",
    "Could not flush events file",
)


def is_out_of_memory(error):
    """Whether `error` is the process or a device running out of memory."""
    if isinstance(error, MemoryError):
        return True
    from tfnorm._keras import tf

    return isinstance(error, tf.errors.ResourceExhaustedError)


def output_reason(error, reason):
    """`reason`, with the disk's own words when TensorFlow put them on a
    later line of its message (TF 2.9 opens with the failing node)."""
    lines = [
        line.strip()
        for line in str(error).splitlines()
        if any(marker in line for marker in _OUTPUT_ERRORS)
    ]
    if lines and lines[0] not in reason:
        return f"{reason} ({lines[0][:300]})"
    return reason


def is_output_error(error):
    """Whether `error` is a failed write of an output (exit 74), not a bug."""
    if isinstance(error, OSError):
        return True
    from tfnorm._keras import tf

    return isinstance(error, tf.errors.OpError) and any(
        marker in str(error) for marker in _OUTPUT_ERRORS
    )

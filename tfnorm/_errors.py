"""`one_line(error)`: an error as the one line tfnorm's messages quote."""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Keras 3 prints the reason in bold
_RAISED = re.compile(r"^(\w+\.)*\w+(Error|Exception): ")
_NOISE = ("Graph execution error", "Detected at node")


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

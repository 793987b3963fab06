"""Labels of text files: class ids or names, mapped to class ids.

A file's labels are either all class ids (`0`, `1`, ... as in `count_classes`)
or all names (`pos`, `neg`, ...). Names are mapped to ids in sorted order, so
the same set of names always gives the same mapping whatever the order of the
lines. The mapping (`label_names`: the class names in id order, `"0"`, `"1"`,
... for id labels) is saved with the run (`save_label_names`) beside the
vocabulary: a resumed run checks it, and `tfnorm predict` names its classes
with it.

Example:

>>> label_names(["pos", "neg", "pos"])
['neg', 'pos']
"""

from __future__ import annotations

import json
import os
import re

from tfnorm._errors import setting_key
from tfnorm.training.data.dataset import DataError

#: Name of the label-mapping file saved with a run.
LABELS_FILE = "labels.json"
# Far more than the class names a run saves (at most 100000 classes).
_MAX_LABELS_BYTES = 64 << 20

_INTEGER = re.compile(r"^[+-]?[0-9]+$")
# Digits grouped by underscores: Python's int() reads `1_0` as 10, a person
# may have meant 1.0, 1 or a name; no reading is safe, so it is refused.
_GROUPED_DIGITS = re.compile(r"^[+-]?[0-9]+(_[0-9]+)+$")


def parse_label(path, line_number, raw):
    """One label as read from a file: an int class id or a str name.

    A string of digits (`"1"`, as CSV gives every label) is a class id, so
    a CSV and a JSON Lines file with the same labels mean the same classes.

    Raises:
        DataError: the label is empty, a negative id, or neither an integer
            nor a string (JSON `true`, `1.5`, `null`, a list).
    """
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            raise DataError(
                f"{path}, line {line_number}: the label must be a non-negative "
                f"integer class id or a name; it is empty. Received: label={raw!r}"
            )
        if _GROUPED_DIGITS.match(text):
            raise DataError(
                f"{path}, line {line_number}: the label is digits with "
                "underscores, which could be read as class id "
                f"{int(text)} or as a name; write a class id in plain digits "
                f"(0, 1, ...) or a name with a letter. Received: label={raw!r}"
            )
        if not _INTEGER.match(text):
            return text
        raw = int(text)
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise DataError(
            f"{path}, line {line_number}: the label must be a non-negative "
            f"integer class id or a name (a string). Received: label={raw!r}"
        )
    return raw


def check_one_kind(path, labels, lines):
    """Raises `DataError` at the first label of another kind than the first one.

    A file mixing ids and names is most likely a mistake (a stray header, a
    shifted column), and no mapping of both would be the one meant.
    """
    first_is_name = isinstance(labels[0], str)
    for label, line in zip(labels, lines):
        if isinstance(label, str) != first_is_name:
            kinds = ("names", "class ids") if first_is_name else ("class ids", "names")
            raise DataError(
                f"{path}, line {line}: the labels mix class ids and names (line "
                f"{lines[0]} has {labels[0]!r}, so every label must be one of the "
                f"{kinds[0]}, not of the {kinds[1]}). Received: label={label!r}"
            )


def label_names(labels):
    """The class names of name labels in id order: the distinct names, sorted."""
    return sorted(set(labels))


def id_label_names(num_classes):
    """The class names of id labels: `"0"` .. `"num_classes - 1"`."""
    return [str(index) for index in range(num_classes)]


def check_saved_names(path, names, saved):
    """Refuses to resume checkpoints trained with another label mapping.

    Args:
        path: the training file.
        names: its class names in id order.
        saved: the names saved with the checkpoints (`load_label_names`), or
            None for a fresh run.
    """
    if saved is None or list(saved) == list(names):
        return
    raise DataError(
        f"{path}: its labels ({_shown(names)}) differ from those the run's "
        f"checkpoints were trained with ({_shown(saved)}, in {LABELS_FILE} beside "
        "them); resuming would give the classes other meanings. Restore the "
        f"file, or start a new run with another {setting_key('checkpoint_dir')}. "
        f"Received: labels={_shown(names)}"
    )


def _shown(names, limit=10):
    shown = ", ".join(str(name) for name in list(names)[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def save_label_names(names, directory):
    """Writes `names` (class names in id order) to `directory/labels.json`."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, LABELS_FILE)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(list(names), handle, ensure_ascii=False)
    os.replace(temporary, path)
    return path


def load_label_names(directory):
    """The class names saved in `directory`, or None when there are none.

    Raises:
        DataError: the file exists but is not a JSON list of strings.
    """
    path = os.path.join(directory, LABELS_FILE)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as handle:
            raw = handle.read(_MAX_LABELS_BYTES + 1)
        if len(raw) > _MAX_LABELS_BYTES:
            raise ValueError(f"larger than {_MAX_LABELS_BYTES >> 20} MiB")
        names = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError) as error:
        raise DataError(f"{path} cannot be read ({error}).") from None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise DataError(
            f"{path}: expected a JSON list of class names. Received: {names!r:.80}"
        )
    return names

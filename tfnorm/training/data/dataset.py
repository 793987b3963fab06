"""What both data sources produce: a `Dataset`, the error a bad file raises,
and the reading of a UTF-8 file every text reader starts from."""

from __future__ import annotations

import dataclasses

import numpy as np

from tfnorm._errors import KeyedMessage


class DataError(KeyedMessage, ValueError):
    """A training or validation file cannot be used; says which file and line.
    Settings the message names are marked with `setting_key`."""


def read_utf8_bytes(path):
    """The bytes of the UTF-8 file `path`, a byte-order mark (as Excel
    writes) dropped; a file that cannot be read, or is not UTF-8, is a
    `DataError` naming the line and byte."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as error:
        raise DataError(
            f"{path}: cannot be read ({error.strerror or error})."
        ) from None
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise DataError(
            f"{path}, line {line}, byte {error.start}: not UTF-8 text "
            f"({error.reason}: byte {raw[error.start : error.start + 1]!r}); "
            "save the file as UTF-8."
        ) from None
    return raw


@dataclasses.dataclass
class Dataset:
    """Token ids and labels held in memory.

    Attributes:
        ids: int32 array `[num_examples, max_len]`, 0 = padding.
        labels: int32 array `[num_examples]`.
        vocab_size: number of distinct ids (padding and unknown included).
        num_classes: number of label classes.
        source: where the examples came from (file path or `task:NAME`).
        label_names: the class names in id order (text files: the sorted
            names, or `"0"`, `"1"`, ... for id labels), or None.
        report: what loading found that the run reports (text files:
            `label_names`, `val_split`, `truncation`), for `summary.json`.
        notes: progress lines saying what loading decided (the validation
            split, the texts cut by `max_len`), for the start of the run.
    """

    ids: np.ndarray
    labels: np.ndarray
    vocab_size: int
    num_classes: int
    source: str
    label_names: list | None = None
    report: dict = dataclasses.field(default_factory=dict)
    notes: list = dataclasses.field(default_factory=list)

    def __len__(self):
        return int(self.labels.shape[0])

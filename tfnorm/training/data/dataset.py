"""What both data sources produce: a `Dataset`, and the error a bad file raises."""

from __future__ import annotations

import dataclasses

import numpy as np

from tfnorm._errors import KeyedMessage


class DataError(KeyedMessage, ValueError):
    """A training or validation file cannot be used; says which file and line.
    Settings the message names are marked with `setting_key`."""


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

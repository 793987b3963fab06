"""What both data sources produce: a `Dataset`, and the error a bad file raises."""

from __future__ import annotations

import dataclasses

import numpy as np


class DataError(ValueError):
    """A training or validation file cannot be used; says which file and line."""


@dataclasses.dataclass
class Dataset:
    """Token ids and labels held in memory.

    Attributes:
        ids: int32 array `[num_examples, max_len]`, 0 = padding.
        labels: int32 array `[num_examples]`.
        vocab_size: number of distinct ids (padding and unknown included).
        num_classes: number of label classes.
        source: where the examples came from (file path or `task:NAME`).
    """

    ids: np.ndarray
    labels: np.ndarray
    vocab_size: int
    num_classes: int
    source: str

    def __len__(self):
        return int(self.labels.shape[0])

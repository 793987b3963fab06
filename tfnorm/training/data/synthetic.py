"""Synthetic tasks (`sorted`, `duplicate`, `majority`): deterministic by
seed, and each needs attention over the whole sequence (no single position
or local window decides the label)."""

from __future__ import annotations

import numpy as np

from tfnorm.choices import SYNTHETIC_TASKS
from tfnorm.training.config.train_defaults import default_vocab_size
from tfnorm.training.data.dataset import Dataset


def make_synthetic(
    task,
    num_examples=2048,
    max_len=16,
    seed=0,
    vocab_size=None,
    num_val_examples=None,
    num_classes=3,
):
    """Training and validation sets for a synthetic task that needs attention.

    * `sorted`: label 1 when the tokens are in non-decreasing order. Half the
      examples are sorted; the rest are sorted sequences with two positions
      swapped, so one distant pair decides the label.
    * `duplicate`: label 1 when some token occurs twice. Negatives hold
      distinct tokens; positives copy one token to another random position.
    * `majority`: tokens fall into `num_classes` classes (id modulo
      `num_classes`); the label is the class holding the most tokens (ties
      are redrawn), which needs a count over every position.

    Args:
        task: one of `SYNTHETIC_TASKS`.
        num_examples: training examples.
        max_len: tokens per example (no padding).
        seed: the same seed gives the same examples.
        vocab_size: ids are drawn from `1 .. vocab_size - 1`; defaults to
            `max(16, 2 * max_len + 1)`.
        num_val_examples: validation examples, drawn with another seed;
            defaults to a quarter of `num_examples` (at least 64).
        num_classes: label classes for `majority` (2 for the others).

    Returns:
        `(train, val)` `Dataset`s.
    """
    if task not in SYNTHETIC_TASKS:
        raise ValueError(
            f"Unknown synthetic task; expected one of {SYNTHETIC_TASKS}. "
            f"Received: task={task!r}"
        )
    if int(max_len) < 2:
        raise ValueError(f"max_len must be at least 2. Received: max_len={max_len}")
    if int(num_examples) < 1:
        raise ValueError(
            f"num_examples must be positive. Received: num_examples={num_examples}"
        )
    vocab_size = int(vocab_size or default_vocab_size(None, max_len))
    if task == "duplicate" and vocab_size - 1 < max_len:
        raise ValueError(
            "The duplicate task needs vocab_size > max_len so that sequences "
            f"without repeats exist. Received: vocab_size={vocab_size}, "
            f"max_len={max_len}"
        )
    if task == "majority" and not 2 <= num_classes <= vocab_size - 1:
        raise ValueError(
            "majority needs 2 <= num_classes < vocab_size. Received: "
            f"num_classes={num_classes}, vocab_size={vocab_size}"
        )
    if num_val_examples is None:
        num_val_examples = max(64, num_examples // 4)
    classes = num_classes if task == "majority" else 2
    generator = _GENERATORS[task]

    def build(count, stream):
        rng = np.random.RandomState(_stream_seed(seed, stream))
        ids, labels = generator(rng, int(count), int(max_len), vocab_size, classes)
        return Dataset(
            ids=ids.astype(np.int32),
            labels=labels.astype(np.int32),
            vocab_size=vocab_size,
            num_classes=classes,
            source=f"task:{task}",
        )

    return build(num_examples, 0), build(num_val_examples, 1)


def _stream_seed(seed, stream):
    return (int(seed) * 7919 + stream * 104729) % (2**31 - 1)


def _sorted_task(rng, count, length, vocab_size, _classes):
    ids = np.sort(rng.randint(1, vocab_size, size=(count, length)), axis=1)
    unsorted = rng.rand(count) < 0.5
    for row in np.nonzero(unsorted)[0]:
        # Swap two positions holding different tokens: the sequence is then
        # out of order at exactly that (possibly distant) pair.
        while ids[row, 0] == ids[row, -1]:
            ids[row] = np.sort(rng.randint(1, vocab_size, size=length))
        while True:
            i, j = sorted(rng.choice(length, 2, replace=False))
            if ids[row, i] != ids[row, j]:
                ids[row, i], ids[row, j] = ids[row, j], ids[row, i]
                break
    labels = np.all(ids[:, 1:] >= ids[:, :-1], axis=1)
    return ids, labels


def _duplicate_task(rng, count, length, vocab_size, _classes):
    ids = np.stack(
        [
            rng.choice(np.arange(1, vocab_size), length, replace=False)
            for _ in range(count)
        ]
    )
    positive = rng.rand(count) < 0.5
    for row in np.nonzero(positive)[0]:
        source, target = rng.choice(length, 2, replace=False)
        ids[row, target] = ids[row, source]
    labels = np.array([len(set(row)) < length for row in ids])
    return ids, labels


def _majority_task(rng, count, length, vocab_size, classes):
    token_class = np.arange(vocab_size) % classes
    ids = np.zeros((count, length), dtype=np.int64)
    labels = np.zeros(count, dtype=np.int64)
    for row in range(count):
        while True:
            candidate = rng.randint(1, vocab_size, size=length)
            counts = np.bincount(token_class[candidate], minlength=classes)
            if np.sum(counts == counts.max()) == 1:
                break
        ids[row], labels[row] = candidate, int(np.argmax(counts))
    return ids, labels


_GENERATORS = {
    "sorted": _sorted_task,
    "duplicate": _duplicate_task,
    "majority": _majority_task,
}

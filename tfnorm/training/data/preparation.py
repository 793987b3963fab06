"""What happens to a text file's examples before training: the validation
split (`split_indices`) and the report of texts cut by `max_len`
(`truncation_report`)."""

from __future__ import annotations

import math

import numpy as np

#: A file with fewer examples is not split: a validation set of one or two
#: examples measures nothing and takes examples from a run that has few.
MIN_SPLIT_EXAMPLES = 10

#: The share of texts that the suggested `max_len` keeps whole.
WHOLE_SHARE = 0.95


def split_indices(num_examples, fraction, seed):
    """Training and validation indices of a seeded split, in file order.

    Args:
        num_examples: examples in the file.
        fraction: the share held out for validation, in `[0, 1)`; 0 for none.
        seed: the run's seed; the same seed, file and fraction give the same
            split, which resume depends on.

    Returns:
        `(train_indices, val_indices)`; `val_indices` is empty when
        `fraction` is 0 or the file has fewer than `MIN_SPLIT_EXAMPLES`
        examples. At least one example is held out otherwise, and at least
        one is kept for training.
    """
    everything = np.arange(num_examples)
    if not fraction or num_examples < MIN_SPLIT_EXAMPLES:
        return everything, everything[:0]
    count = min(max(1, int(round(num_examples * fraction))), num_examples - 1)
    # Its own stream of the seed: the weights and the batch order use others.
    rng = np.random.RandomState((int(seed) * 7919 + 3 * 104729) % (2**31 - 1))
    held_out = np.zeros(num_examples, dtype=bool)
    held_out[rng.permutation(num_examples)[:count]] = True
    return everything[~held_out], everything[held_out]


def split_note(path, num_examples, num_val, fraction, seed):
    """The progress line saying how the validation set was made."""
    if num_val:
        return (
            f"validation: {num_val} of the {num_examples} examples of {path} held "
            f"out (val_split {fraction:g}, seed {seed}); "
            f"{num_examples - num_val} left for training"
        )
    if not fraction:
        return "no validation: val_split is 0 and no val_data is given"
    return (
        f"no validation: {path} has {num_examples} examples, fewer than the "
        f"{MIN_SPLIT_EXAMPLES} a val_split needs; give val_data to validate"
    )


def shortest_whole_length(counts, share=WHOLE_SHARE):
    """The smallest length that keeps at least `share` of the texts whole."""
    if len(counts) == 0:
        return 0
    ordered = np.sort(np.asarray(counts))
    return int(ordered[max(0, math.ceil(share * len(ordered)) - 1)])


def truncation_report(max_len, train_counts, val_counts=None):
    """How many texts `max_len` cuts, and the `max_len` keeping 95% whole.

    Args:
        max_len: the run's `max_len`.
        train_counts: tokens per training text (`token_counts`).
        val_counts: the same for the validation texts, or None.

    Returns:
        `(report, line)`: the `truncation` entry of `summary.json`'s data
        section and the progress line saying it.
    """
    train_counts = np.asarray(train_counts)
    report = {
        "max_len": int(max_len),
        "train_texts": int(len(train_counts)),
        "train_cut": int(np.sum(train_counts > max_len)),
        "val_texts": 0,
        "val_cut": 0,
        "max_len_95": shortest_whole_length(train_counts),
        "longest": int(train_counts.max()) if len(train_counts) else 0,
    }
    if val_counts is not None:
        val_counts = np.asarray(val_counts)
        report["val_texts"] = int(len(val_counts))
        report["val_cut"] = int(np.sum(val_counts > max_len))
    cut, total = report["train_cut"], report["train_texts"]
    line = (
        f"max_len {max_len} cuts {cut} of {total} training texts "
        f"({100.0 * cut / max(total, 1):.1f}%)"
    )
    if report["val_texts"]:
        line += f" and {report['val_cut']} of {report['val_texts']} validation texts"
    line += (
        f"; max_len {report['max_len_95']} would keep 95% of the training "
        f"texts whole (the longest has {report['longest']} tokens)"
    )
    return report, line

"""Finding the shuffles of a `tf.data` pipeline that no seed fixes.

Exact resume restores a dataset's iterator, and re-creates the dataset by
calling `data_fn` again: a shuffle without a seed (neither its own `seed`
nor a global one set by `tf.random.set_seed` before it was made) then draws
another order, and the resumed run trains on other batches than an
uninterrupted one would.

The pipeline is read through tf.data's private Python objects (each knows its
inputs, and a shuffle its two seeds), which costs nothing even when the
dataset holds its data as constants. Shuffles made inside functions the
pipeline runs (`interleave`, `flat_map`) and random ops inside `map` are not
seen.
"""

from __future__ import annotations


def unseeded_shuffles(dataset):
    """The number of shuffles in `dataset`'s pipeline whose seeds are both 0
    (TensorFlow's "none given": each iterator then draws fresh seeds)."""
    count, seen, pending = 0, set(), [dataset]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if _is_unseeded_shuffle(current):
            count += 1
        try:
            pending.extend(current._inputs())
        except (AttributeError, NotImplementedError, TypeError):
            pass  # a dataset class that does not list its inputs
    return count


def _is_unseeded_shuffle(dataset):
    if "Shuffle" not in type(dataset).__name__:
        return False
    seeds = [getattr(dataset, name, None) for name in ("_seed", "_seed2")]
    try:
        return all(seed is not None and int(seed) == 0 for seed in seeds)
    except (TypeError, ValueError):  # a seed only known inside a graph
        return False

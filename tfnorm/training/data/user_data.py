"""What a `data_fn` returns, checked and held for the run (`workloads.own_model`).

`data_fn()` returns the training data, or `(train, validation)`, or a dict
with `"train"` and `"validation"`; each part is a `tf.data.Dataset` of
`(x, y)` or `(x, y, sample_weight)` batches (`DatasetData`), or a tuple of
NumPy arrays `(x, y)` / `(x, y, sample_weight)` (`ArrayData`; `x` may be a
dict or list of arrays). A form that is none of these is a `DataError`.

A pair `(a, b)` is `(train, validation)` when `a` is a dataset or both are
parts of data; when `b` is an array (or a dict of them) it is `(x, y)`, so
`([x1, x2], y)` feeds a model of two inputs. Two pairs of equally long
arrays read either way and are refused: the dict form names the parts.
A dataset must yield batches: one of single examples (not batched, or
`unbatch()`ed) is refused with its element spec.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile

import numpy as np

from tfnorm._keras import tf
from tfnorm.training.data.dataset import DataError

_DATA_FORMS = (
    "a tf.data.Dataset of (x, y) batches, NumPy arrays (x, y), or a "
    "(train, validation) pair of those"
)


class ArrayData:
    """`(x, y[, sample_weight])` NumPy arrays, batched by the run."""

    def __init__(self, parts, role):
        self.parts = tuple(
            tf.nest.map_structure(np.asarray, part)
            for part in parts
            if part is not None
        )
        sizes = {int(a.shape[0]) if a.ndim else 0 for a in tf.nest.flatten(self.parts)}
        if len(sizes) != 1 or 0 in sizes:
            raise DataError(
                f"data_fn's {role} arrays must hold the same number (>= 1) of "
                f"examples in their first dimension. Received: "
                f"{role}={describe_shapes(self.parts)}"
            )
        self.size = sizes.pop()

    def __len__(self):
        return self.size

    def describe(self):
        return f"{self.size} examples {describe_shapes(self.parts)}"

    def take(self, indices):
        return tf.nest.map_structure(lambda a: a[indices], self.parts)

    def sha256(self):
        digest = hashlib.sha256()
        for array in tf.nest.flatten(self.parts):
            digest.update(str((array.dtype.str, array.shape)).encode())
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()


class DatasetData:
    """A `tf.data.Dataset` of batches, consumed through a saved iterator."""

    def __init__(self, dataset, role):
        spec = dataset.element_spec
        if not isinstance(spec, tuple) or len(spec) not in (2, 3):
            raise DataError(
                f"data_fn's {role} dataset must yield (x, y) or (x, y, "
                f"sample_weight) batches. Received: element_spec={spec}"
            )
        if _single_examples(spec):
            raise DataError(
                f"data_fn's {role} dataset yields single examples, not batches "
                f"(element_spec {describe_shapes(spec)}): batch it in data_fn, "
                "e.g. dataset.batch(32)."
            )
        self.dataset = dataset
        self.batches = int(dataset.cardinality())

    def describe(self):
        known = self.batches >= 0
        return f"{self.batches if known else 'an unknown number of'} batches"

    def iterator(self):
        """`(iterator over the dataset repeated, whether TensorFlow can save
        its position)`: not when the dataset runs Python code
        (`Dataset.from_generator`, `py_function`), whose state it cannot see."""
        dataset = self.dataset.repeat()
        policy = dataset.options().experimental_external_state_policy
        if policy not in (None, tf.data.experimental.ExternalStatePolicy.FAIL):
            return iter(dataset), True  # the user chose to save without it
        # A trial save of an iterator of its own, as small as a fresh one's
        # where TensorFlow checks a fresh iterator's dataset, else after one
        # batch (the size of a checkpoint's copy).
        probe = iter(self.dataset)
        if _fresh_iterators_save_anything():
            next(probe, None)
        return iter(dataset), _saves(probe)

    def first_batch(self):
        for batch in self.dataset.take(1):
            return batch
        raise DataError("data_fn's training dataset is empty.")


def _saves(iterator):
    """Whether TensorFlow can checkpoint `iterator` (written to a temporary
    directory, removed at once)."""
    with tempfile.TemporaryDirectory() as directory:
        try:
            tf.train.Checkpoint(iterator=iterator).write(
                os.path.join(directory, "probe")
            )
        except (tf.errors.FailedPreconditionError, tf.errors.UnimplementedError):
            return False
    return True


@functools.lru_cache(maxsize=None)
def _fresh_iterators_save_anything():
    """Whether this TensorFlow saves a fresh iterator without looking at
    its dataset (2.9 does; a Python generator's then fails only later)."""

    def numbers():
        yield 0

    spec = tf.TensorSpec((), tf.int32)
    dataset = tf.data.Dataset.from_generator(numbers, output_signature=spec)
    return _saves(iter(dataset))


def split_user_data(result):
    """`(train, validation or None)` from what `data_fn` returned."""
    if isinstance(result, dict) and "train" in result:
        unknown = set(result) - {"train", "validation"}
        if unknown:
            raise DataError(
                f"data_fn returned a dict with keys {sorted(unknown)}; only "
                "'train' and 'validation' are read."
            )
        return _part(result["train"], "train"), _optional(result.get("validation"))
    if isinstance(result, (tuple, list)) and len(result) == 2:
        first, second = result
        if isinstance(first, tf.data.Dataset) or _is_train_and_validation(
            first, second
        ):
            return _part(first, "train"), _optional(second)
    return _part(result, "train"), None


def _is_train_and_validation(first, second):
    """Whether `(first, second)` of NumPy data is `(train, validation)`
    rather than `(x, y)` with `x` a list or tuple of inputs."""
    if not isinstance(first, (tuple, list)) or len(first) not in (2, 3):
        return False
    if second is None or isinstance(second, tf.data.Dataset):
        return True
    if not isinstance(second, (tuple, list)):
        return False  # `([x1, x2], y)`: y is an array or a dict of them
    lengths = _lengths(first) | _lengths(second)
    if len(lengths) == 1:
        raise DataError(
            "data_fn returned two pairs of equally long arrays "
            f"{describe_shapes((first, second))}, which read as (train, "
            "validation) and as (inputs, labels) alike: return "
            "{'train': ..., 'validation': ...} for the first, "
            "{'train': (inputs, labels)} for the second."
        )
    return True


def _lengths(part):
    return {np.shape(leaf)[0] if np.ndim(leaf) else 0 for leaf in tf.nest.flatten(part)}


def _single_examples(spec):
    """Whether an element spec is of single examples: a part of rank 0, or
    parts whose known first dimensions differ (batches share theirs)."""
    shapes = [getattr(leaf, "shape", None) for leaf in tf.nest.flatten(spec)]
    ranks = [shape.rank for shape in shapes if shape is not None]
    if 0 in ranks:
        return True
    firsts = {
        shape[0]
        for shape in shapes
        if shape is not None and shape.rank and shape[0] is not None
    }
    return len(firsts) > 1


def _optional(part):
    return None if part is None else _part(part, "validation")


def _part(part, role):
    if isinstance(part, tf.data.Dataset):
        return DatasetData(part, role)
    if isinstance(part, (tuple, list)) and len(part) in (2, 3):
        try:
            return ArrayData(part, role)
        except (TypeError, ValueError) as error:
            if isinstance(error, DataError):
                raise
            raise DataError(
                f"data_fn's {role} data are not arrays ({error})."
            ) from None
    if hasattr(part, "__next__"):
        raise DataError(
            f"data_fn returned a Python {type(part).__name__} for {role}, which "
            "the run cannot batch or checkpoint: return NumPy arrays (x, y) or "
            "a tf.data.Dataset of (x, y) batches built from arrays or files "
            "(its position is saved in every checkpoint)."
        )
    raise DataError(
        f"data_fn must return {_DATA_FORMS}. Received for {role}: {type(part).__name__}"
    )


def describe_shapes(structure):
    """Shapes and dtypes of a nested structure, for error messages."""

    def describe(value):
        shape = getattr(value, "shape", None)
        dtype = getattr(value, "dtype", None)
        if shape is None:
            return type(value).__name__
        return f"{getattr(dtype, 'name', dtype)}{list(shape)}"

    return str(tf.nest.map_structure(describe, structure))

"""The norm probe: statistics of norm layers' tensors on a fixed batch.

The probe never touches the training step. It is a separate `tf.function`
that calls the model on a fixed probe batch with `training=False`. Only while
that function is being traced, each recorded layer's `call` is shadowed by an
instance attribute that records the tensors going in and out; the attribute is
removed before tracing ends, so the traced training, evaluation and predict
functions never see it. Because it works at the level of `Layer.call`, it
finds norms inside nested functional models, Sequential models and subclassed
composite layers alike, in every Keras generation tfnorm supports.
"""

from __future__ import annotations

import math

import numpy as np

from tfnorm._errors import one_line
from tfnorm._keras import keras, shadow_call, tf, unshadow_call
from tfnorm.callbacks.layers import norm_epsilon, norm_statistic

#: The tensors of a layer the probe can record.
RECORDABLE = ("outputs", "inputs")
#: The scalars the probe reports per recorded tensor.
SCALARS = ("mean", "std", "min", "max", "nonfinite_fraction")


def as_batches(data, argument="data"):
    """The probe batches as a list of `(x, y, sample_weight)` tensor tuples.

    `data` is one batch as `fit` takes it (`x`, or a tuple `(x, y)` /
    `(x, y, sample_weight)`), or a small finite `tf.data.Dataset` of such
    batches, which is read once here.
    """
    if data is None:
        raise ValueError(f"`{argument}` must be a batch or a dataset. Received: None")
    if isinstance(data, tf.data.Dataset):
        if int(data.cardinality()) == int(tf.data.INFINITE_CARDINALITY):
            raise ValueError(
                f"`{argument}` is an infinite dataset (it repeats), which the "
                f"probe cannot read; pass a few batches, e.g. "
                f"`dataset.take(4)`. Received: {argument}={data!r}"
            )
        elements = list(data)
    else:
        elements = [data]
    if not elements:
        raise ValueError(f"`{argument}` holds no batch. Received: {argument}={data!r}")
    batches = []
    for element in elements:
        try:
            parts = keras.utils.unpack_x_y_sample_weight(element)
            batches.append(tuple(_to_tensors(part) for part in parts))
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"`{argument}` must hold tensors or arrays ({error}). "
                f"Received: {argument}={data!r}"
            ) from None
        _check_not_empty(batches[-1][0], argument, batches)
    return batches


def _check_not_empty(x, argument, batches):
    # A batch of 0 examples runs without an error and records histograms and
    # statistics of nothing (NaN means, empty buckets) at every step.
    for tensor in tf.nest.flatten(x):
        shape = getattr(tensor, "shape", None)
        if shape is not None and shape.rank and shape[0] == 0:
            raise ValueError(
                f"`{argument}` holds an empty batch (0 examples), whose "
                "statistics would be NaN; give at least one example. "
                f"Received: {argument}={describe_batches(batches)}"
            )


def describe_batches(batches):
    """A short description of probe batches (shapes and dtypes, no values)."""
    described = []
    for batch in batches:
        parts = [
            str(tf.nest.map_structure(lambda t: f"{t.dtype.name}{list(t.shape)}", part))
            for part in batch
            if part is not None
        ]
        described.append(parts[0] if len(parts) == 1 else f"({', '.join(parts)})")
    return described[0] if len(described) == 1 else f"[{', '.join(described)}]"


def check_probe_data(model, run, batches, argument="data"):
    """Calls `run()` once, which feeds `batches` to `model`; raises naming
    `argument` if the model cannot take them."""
    try:
        run()
    except (TypeError, ValueError, tf.errors.OpError) as error:
        reason = one_line(error, limit=400, with_type=False)
        raise ValueError(
            f"`{argument}` cannot be fed to model {model.name!r} ({reason}). "
            f"Received: {argument}={describe_batches(batches)}"
        ) from error


def _to_tensors(structure):
    if structure is None:
        return None
    # Tensors (not NumPy arrays) keep the probe's tf.function from retracing.
    return tf.nest.map_structure(tf.convert_to_tensor, structure)


class NormProbe:
    """Runs the model on probe batches and returns statistics per norm layer.

    Args:
        model: the model to probe.
        entries: `[(path, layer)]` of the layers to record.
        record: which tensors to record, a subset of `("outputs", "inputs")`.
        max_values: at most this many values per tensor are kept for
            histograms (an evenly strided sample); statistics use all values.
        input_floor: also compute each norm layer's smallest per-row input
            statistic (variance, mean square or norm, as the layer states
            it) divided by its `epsilon` (see `NormHealthMonitor`); inf for
            a norm without a statistic (DyT), which has no floor to reach.
    """

    def __init__(self, model, entries, record, max_values=None, input_floor=False):
        self.model = model
        self.entries = list(entries)
        self.record = tuple(record)
        self.max_values = max_values
        self.input_floor = input_floor
        self.statistics = (
            {path: norm_statistic(layer) for path, layer in self.entries}
            if input_floor
            else {}
        )
        self.call_order = None
        self._function = tf.function(self._trace, reduce_retracing=True)

    @property
    def trace_count(self):
        """How many times the probe function has been traced."""
        return self._function.experimental_get_tracing_count()

    def _trace(self, x):
        calls = []
        installed = []
        try:
            for path, layer in self.entries:
                _install_recorder(layer, path, calls)
                installed.append(layer)
            self.model(x, training=False)
        finally:
            for layer in installed:
                unshadow_call(layer)
        layers = dict(self.entries)
        results = {}
        order = []
        for path, inputs, outputs in calls:
            if path not in results:
                results[path] = {"outputs": [], "inputs": [], "floor": []}
                order.append(path)
            if "outputs" in self.record:
                results[path]["outputs"].append(_tensor_stats(outputs, self.max_values))
            if "inputs" in self.record:
                results[path]["inputs"].append(_tensor_stats(inputs, self.max_values))
            if self.input_floor:
                statistic = self.statistics[path].row_statistic(inputs)
                epsilon = norm_epsilon(layers[path])
                results[path]["floor"].append(_floor_ratio(statistic, epsilon))
        self.call_order = order
        return results

    def run(self, batches):
        """`{path: {"outputs": stats, "inputs": stats, "floor": float}}` in call order.

        `stats` is a dict with `mean`, `std`, `min`, `max`, `nonfinite_fraction`,
        `count` and `values` (finite sample, NumPy). Layers not called on the
        probe batches are absent.
        """
        merged = {}
        for x, _, _ in batches:
            raw = self._function(x)
            for path in self.call_order:
                slot = merged.setdefault(
                    path, {"outputs": [], "inputs": [], "floor": []}
                )
                for key in ("outputs", "inputs", "floor"):
                    slot[key].extend(raw[path][key])
        results = {}
        for path in self.call_order:
            slot = merged[path]
            results[path] = {}
            for key in self.record:
                results[path][key] = _merge_stats(slot[key])
            if self.input_floor:
                results[path]["floor"] = float(min(float(v) for v in slot["floor"]))
        return results


def _install_recorder(layer, path, calls):
    original = layer.call

    def recording_call(*args, **kwargs):
        outputs = original(*args, **kwargs)
        inputs = args[0] if args else kwargs.get("inputs")
        calls.append((path, inputs, outputs))
        return outputs

    shadow_call(layer, recording_call)


def _floor_ratio(statistic, epsilon):
    """The smallest per-row statistic / epsilon (inf without a statistic)."""
    if statistic is None:
        return tf.constant(np.inf)
    ratio = tf.reshape(tf.cast(statistic, tf.float32) / epsilon, [-1])
    # Non-finite rows are reported through the non-finite fraction instead.
    ratio = tf.where(tf.math.is_finite(ratio), ratio, tf.fill(tf.shape(ratio), np.inf))
    return tf.reduce_min(ratio)


def _tensor_stats(x, max_values):
    """Sufficient statistics of `x` and an evenly strided sample of its values.

    Sums are float64 so that statistics merged over calls and batches keep
    their precision; mean/std/min/max cover the finite values only.
    """
    flat = tf.reshape(tf.cast(x, tf.float32), [-1])
    finite = tf.math.is_finite(flat)
    as64 = tf.cast(tf.where(finite, flat, tf.zeros_like(flat)), tf.float64)
    inf = tf.constant(np.inf, tf.float32)
    size = tf.size(flat)
    if max_values:
        stride = tf.maximum(1, (size + max_values - 1) // max_values)
        sample = flat[::stride]
    else:
        sample = flat
    return {
        "count": tf.cast(size, tf.float64),
        "finite": tf.reduce_sum(tf.cast(finite, tf.float64)),
        "sum": tf.reduce_sum(as64),
        "sum_sq": tf.reduce_sum(tf.square(as64)),
        "min": tf.reduce_min(tf.where(finite, flat, inf)),
        "max": tf.reduce_max(tf.where(finite, flat, -inf)),
        "sample": tf.boolean_mask(sample, tf.math.is_finite(sample)),
    }


def _merge_stats(parts):
    count = sum(float(p["count"]) for p in parts)
    finite = sum(float(p["finite"]) for p in parts)
    total = sum(float(p["sum"]) for p in parts)
    total_sq = sum(float(p["sum_sq"]) for p in parts)
    nan = float("nan")
    if finite:
        mean = total / finite
        std = math.sqrt(max(total_sq / finite - mean * mean, 0.0))
        low = min(float(p["min"]) for p in parts)
        high = max(float(p["max"]) for p in parts)
    else:
        mean = std = low = high = nan
    return {
        "count": count,
        "mean": mean,
        "std": std,
        "min": low,
        "max": high,
        "nonfinite_fraction": (count - finite) / count if count else 0.0,
        "values": np.concatenate([np.asarray(p["sample"]) for p in parts]),
    }

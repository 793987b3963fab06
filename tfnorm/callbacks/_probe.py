"""What the callbacks share: finding layers, probing norms, step bookkeeping.

The probe never touches the training step. It is a separate `tf.function`
that calls the model on a fixed probe batch with `training=False`. Only while
that function is being traced, each norm layer's `call` is shadowed by an
instance attribute that records the tensors going in and out; the attribute is
removed before tracing ends, so the traced training, evaluation and predict
functions never see it. Because it works at the level of `Layer.call`, it
finds norms inside nested functional models, Sequential models and subclassed
composite layers alike, in every Keras generation tfnorm supports.
"""

from __future__ import annotations

import math

import numpy as np

from tfnorm._checks import is_int
from tfnorm._keras import keras, tf
from tfnorm.layers import RMSNorm, ScaleNorm, is_norm_layer

RECORDABLE = ("outputs", "inputs")


# ---------------------------------------------------------------- layer paths


def _children(layer):
    # `_flatten_layers` exists with this signature in Keras 2.9, tf_keras and
    # Keras 3; it yields tracked sublayers (including those held in lists).
    return list(layer._flatten_layers(include_self=False, recursive=False))


def walk_layers(model):
    """Yields `(path, layer)` for every layer below `model`, depth first.

    The path joins layer names from the model's direct children down, e.g.
    `encoder/block_3/attention_norm`; the model's own name is left out. A
    layer reachable by several paths (shared) is yielded once, under the
    first path.
    """
    seen = set()
    used_paths = set()

    def visit(layer, prefix):
        for child in _children(layer):
            if id(child) in seen:
                continue
            seen.add(id(child))
            path = f"{prefix}{child.name}"
            if path in used_paths:
                # Subclassed layers may give two sublayers the same name.
                suffix = 1
                while f"{path}_{suffix}" in used_paths:
                    suffix += 1
                path = f"{path}_{suffix}"
            used_paths.add(path)
            yield path, child
            yield from visit(child, path + "/")

    yield from visit(model, "")


def find_norm_layers(model):
    """`[(path, layer)]` for every norm layer in `model` (see `is_norm_layer`)."""
    return [(path, layer) for path, layer in walk_layers(model) if is_norm_layer(layer)]


def select_layers(model, layers, argument="layers"):
    """`[(path, layer)]` for `layers`: "norms" or a list of paths, names or layers."""
    if isinstance(layers, str) and layers == "norms":
        return find_norm_layers(model)
    if isinstance(layers, str) or not isinstance(layers, (list, tuple)):
        raise ValueError(
            f'`{argument}` must be "norms" or a list of layer paths, names or '
            f"layers. Received: {argument}={layers!r}"
        )
    everything = list(walk_layers(model))
    selected = []
    for wanted in layers:
        matches = [
            (path, layer)
            for path, layer in everything
            if layer is wanted or path == wanted or layer.name == wanted
        ]
        if not matches:
            raise ValueError(
                f"`{argument}` names a layer that is not in model "
                f"{model.name!r} (its layers: {[p for p, _ in everything]}). "
                f"Received: {wanted!r}"
            )
        selected.extend(m for m in matches if m not in selected)
    return selected


def find_weighted_layers(model):
    """`[(path, layer, variables)]`: each layer with the trainable variables it owns.

    A composite layer's own variables exclude those of its sublayers, so each
    variable is counted under exactly one layer.
    """
    entries = []
    for path, layer in walk_layers(model):
        if not layer.trainable:
            continue
        nested = {id(v) for child in _children(layer) for v in child.trainable_weights}
        own = [v for v in layer.trainable_weights if id(v) not in nested]
        if own:
            entries.append((path, layer, own))
    return entries


# ------------------------------------------------------------------- probe data


def as_batches(data, argument="data"):
    """The probe batches as a list of `(x, y, sample_weight)` tensor tuples.

    `data` is one batch as `fit` takes it (`x`, or a tuple `(x, y)` /
    `(x, y, sample_weight)`), or a small `tf.data.Dataset` of such batches,
    which is read once here.
    """
    if data is None:
        raise ValueError(f"`{argument}` must be a batch or a dataset. Received: None")
    elements = list(data) if isinstance(data, tf.data.Dataset) else [data]
    if not elements:
        raise ValueError(f"`{argument}` holds no batch. Received: {argument}={data!r}")
    batches = []
    for element in elements:
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(element)
        batches.append(tuple(_to_tensors(part) for part in (x, y, sample_weight)))
    return batches


def _to_tensors(structure):
    if structure is None:
        return None
    # Tensors (not NumPy arrays) keep the probe's tf.function from retracing.
    return tf.nest.map_structure(tf.convert_to_tensor, structure)


# -------------------------------------------------------------------- the probe


def _second_moment_kind(layer):
    """What the layer divides by, which `epsilon` is compared with."""
    if isinstance(layer, ScaleNorm):
        return "norm"
    rms_classes = (RMSNorm,)
    if hasattr(keras.layers, "RMSNormalization"):
        rms_classes += (keras.layers.RMSNormalization,)
    if isinstance(layer, rms_classes):
        return "mean_square"
    return "variance"


def _norm_axes(layer, rank):
    axes = getattr(layer, "_axes", None)  # tfnorm layers, after build
    if axes is None:
        axis = layer.axis
        axes = axis if isinstance(axis, (list, tuple)) else [axis]
    return sorted({int(a) % rank for a in axes})


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


def _row_floor_ratio(layer, x):
    """Smallest per-row (variance, mean square or norm) / epsilon of `x`."""
    x = tf.cast(x, tf.float32)
    axes = _norm_axes(layer, x.shape.rank)
    kind = _second_moment_kind(layer)
    if kind == "variance":
        moment = tf.math.reduce_variance(x, axis=axes)
    elif kind == "mean_square":
        moment = tf.reduce_mean(tf.square(x), axis=axes)
    else:
        moment = tf.sqrt(tf.reduce_sum(tf.square(x), axis=axes))
    ratio = tf.reshape(moment / float(layer.epsilon), [-1])
    # Non-finite rows are reported through the non-finite fraction instead.
    ratio = tf.where(tf.math.is_finite(ratio), ratio, tf.fill(tf.shape(ratio), np.inf))
    return tf.reduce_min(ratio)


class NormProbe:
    """Runs the model on probe batches and returns statistics per norm layer.

    Args:
        model: the model to probe.
        entries: `[(path, layer)]` of the layers to record.
        record: which tensors to record, a subset of `("outputs", "inputs")`.
        max_values: at most this many values per tensor are kept for
            histograms (an evenly strided sample); statistics use all values.
        input_floor: also compute each layer's smallest input
            variance / epsilon (see `NormHealthMonitor`).
    """

    def __init__(self, model, entries, record, max_values=None, input_floor=False):
        self.model = model
        self.entries = list(entries)
        self.record = tuple(record)
        self.max_values = max_values
        self.input_floor = input_floor
        self.call_order = None
        self._function = tf.function(self._trace, reduce_retracing=True)

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
                object.__delattr__(layer, "call")
        layers = dict((path, layer) for path, layer in self.entries)
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
                results[path]["floor"].append(_row_floor_ratio(layers[path], inputs))
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

    # `object.__setattr__` bypasses Keras's attribute tracking: the recorder
    # is a plain function, not state, and is deleted again after tracing.
    object.__setattr__(layer, "call", recording_call)


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


SCALARS = ("mean", "std", "min", "max", "nonfinite_fraction")


class SummaryWriter:
    """Writes histograms and scalars to `log_dir` from one traced function.

    Eager `tf.summary` calls cost milliseconds each; a model with dozens of
    norms writes hundreds of summaries per record, so they are written from
    a `tf.function` (traced again only when the set of tags changes).
    """

    def __init__(self, log_dir, buckets=30):
        self.log_dir = str(log_dir)
        self.buckets = buckets
        self._writer = None
        self._function = None

    def write(self, step, histograms=None, scalars=None):
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.log_dir)
            # A new writer is a new resource: the function must capture it.
            self._function = tf.function(self._write, reduce_retracing=True)
        histograms = {
            tag: tf.convert_to_tensor(values, tf.float32)
            for tag, values in (histograms or {}).items()
        }
        scalars = {
            tag: tf.constant(value, tf.float32)
            for tag, value in (scalars or {}).items()
        }
        with self._writer.as_default():
            self._function(tf.constant(int(step), tf.int64), histograms, scalars)
        self._writer.flush()

    def _write(self, step, histograms, scalars):
        for tag, values in histograms.items():
            tf.summary.histogram(tag, values, step=step, buckets=self.buckets)
        for tag, value in scalars.items():
            tf.summary.scalar(tag, value, step=step)

    def flush(self):
        if self._writer is not None:
            self._writer.flush()

    def close(self):
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self._function = None


# ------------------------------------------------------------------ scheduling


def validate_every_n_steps(every_n_steps):
    if not is_int(every_n_steps) or every_n_steps < 1:
        raise ValueError(
            "`every_n_steps` must be a positive int. "
            f"Received: every_n_steps={every_n_steps!r}"
        )
    return int(every_n_steps)


class PeriodicCallback(keras.callbacks.Callback):
    """Calls `self._periodic(step)` every `every_n_steps` steps and at epoch end.

    Steps count training batches across epochs, starting from the optimizer's
    iteration count when `fit` begins (so a resumed `fit` continues the
    numbering). The count is kept here rather than read from the optimizer
    each batch, which would wait for the device on every step.
    """

    def __init__(self, every_n_steps):
        super().__init__()
        self.every_n_steps = validate_every_n_steps(every_n_steps)
        self._step = 0
        self._epoch_start_step = 0
        self._last_step = None
        # Keras 2: our batch hooks need no NumPy logs, so fit need not
        # convert them (and wait for the device) on every batch.
        self._supports_tf_logs = True

    def set_model(self, model):
        # `fit` calls this on every call: keep the traced probe functions
        # unless the model really changes.
        if model is not getattr(self, "model", None):
            self._forget_model()
        super().set_model(model)

    def _forget_model(self):
        """Drops what was built for the previous model."""

    def on_train_begin(self, logs=None):
        optimizer = getattr(self.model, "optimizer", None)
        iterations = getattr(optimizer, "iterations", None)
        self._step = 0 if iterations is None else int(np.asarray(iterations.numpy()))
        self._last_step = None

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start_step = self._step

    def on_train_batch_end(self, batch, logs=None):
        if self._advance(batch):
            self._run_once(self._step)

    def _advance(self, batch):
        """Updates the step count; True when a multiple of `every_n_steps` passed."""
        previous = self._step
        # `batch` is the last batch index run (several with steps_per_execution).
        self._step = self._epoch_start_step + int(batch) + 1
        return self._step // self.every_n_steps > previous // self.every_n_steps

    def on_epoch_end(self, epoch, logs=None):
        self._run_once(self._step)

    def _run_once(self, step):
        if step != self._last_step:
            self._last_step = step
            self._periodic(step)

    def _periodic(self, step):
        raise NotImplementedError


class SummaryCallback(PeriodicCallback):
    """A periodic callback whose `log(step)` writes to `self._writer`
    (a `SummaryWriter` its subclass creates)."""

    def log(self, step):
        raise NotImplementedError

    def _periodic(self, step):
        self.log(step)

    def on_train_end(self, logs=None):
        self._writer.flush()

    def close(self):
        """Closes the event file (a later `log` opens a new one)."""
        self._writer.close()


def require_model(callback):
    model = getattr(callback, "model", None)
    if model is None:
        raise ValueError(
            f"{type(callback).__name__} has no model: call `set_model(model)` "
            "before logging from a custom training loop."
        )
    return model

"""Which primitives serve a formula call (its route), and the [rows,
features] view the formula then runs on.

How the passes over memory are best spent depends on where the formula
runs, so each formula is written once against the primitives
(`primitives`) and one implementation of them is picked per call:

* CPU, float32 statistics (float32 and half-precision inputs), trailing
  axes (the usual case), in graph mode and under XLA: "fused", `FusedRows`.
* CPU, float64 (trailing axes): "matvec", `MatvecReductions`.
* GPU (float32 matmuls may run in TF32 there) and other axes: "reduce",
  plain `Reductions`.

Under XLA, TensorFlow 2.21 runs the matvec row reductions faster than the
fused-kernel ops when a norm is timed alone, but not inside a training step:
a matrix-vector product does not fuse with the ops that make its input (a
Post-LN block's residual add and dropout), which then have to be written
out. The Post-LN encoder step of `bench/encoder.py` spent 14% more time in
its norms that way than with the fused-kernel ops (about 0%), so float32
takes "fused" under XLA in every release.

Where a call runs is read from its input's placement, per call: a CPU
placement (an eager tensor on the CPU, or one made under a
`tf.device("/CPU:0")` scope) takes the CPU routes on a machine with GPUs
too. A graph tensor made outside any device scope names no device; the
placer puts its ops on a GPU when TensorFlow sees one, and so does this.
Devices other than CPUs and GPUs take the CPU routes, as they did when the
choice was only whether the process saw a GPU.
A `tf.function` called under an eager device scope traces with inputs that
name no device, so there the choice is the placer's default.
Only the choice is tested here (with made-up device names and GPUs); the
test machines have no GPU, so the GPU route itself has not run on one.
"""

from __future__ import annotations

import functools
import math

from tfnorm._keras import tf
from tfnorm.layers._ops.primitives import FusedRows, MatvecReductions, Reductions
from tfnorm.layers.arguments import statistics_dtype

#: Route override for tests: None (pick per call), "fused" (float32 only),
#: "matvec" or "reduce".
ROUTE_OVERRIDE = None

_GPU_TYPES = ("GPU", "XLA_GPU")


@functools.lru_cache(maxsize=None)
def gpus_visible():
    """Whether TensorFlow sees a GPU (after `tf.config.set_visible_devices`).

    Asking starts TensorFlow's runtime, after which the answer cannot
    change, so it is asked once.
    """
    return bool(tf.config.list_logical_devices("GPU"))


@functools.lru_cache(maxsize=None)
def _device_type(device):
    # Parsed once per device string: eager calls decide their route on every
    # call, and a process meets only a handful of device strings.
    return tf.DeviceSpec.from_string(device).device_type


def is_gpu_placement(device):
    """Whether a tensor whose `.device` is `device` is on a GPU, or will be.

    A device string without a device type (empty for graph tensors made
    outside any device scope) leaves the device to the placer, which picks
    a GPU when TensorFlow sees one.
    """
    kind = _device_type(device)
    if kind is None:
        return gpus_visible()
    return kind in _GPU_TYPES


def _trailing(axes, rank):
    return list(axes) == list(range(rank - len(axes), rank))


def route(x, axes, rank):
    """This call's route: "fused", "matvec" or "reduce"."""
    if ROUTE_OVERRIDE is not None:
        return ROUTE_OVERRIDE
    if not _trailing(axes, rank) or is_gpu_placement(x.device):
        return "reduce"
    if statistics_dtype(x.dtype) == tf.float32:
        return "fused"
    return "matvec"


def primitives_for(x, gamma, beta, axes, rank):
    """(x, gamma, beta, primitives, restore): on a [rows, features] view
    when `axes` are trailing and the route allows, else as given."""
    chosen = route(x, axes, rank)
    if chosen == "reduce" or not _trailing(axes, rank):
        return x, gamma, beta, Reductions(rank, axes), lambda t: t
    features = math.prod(x.shape[a] for a in axes) if axes else 1
    shape = tf.shape(x)

    def flat(t):
        return None if t is None else tf.reshape(t, [-1, features])

    def restore(t):
        return tf.reshape(t, shape)

    if chosen == "fused":
        primitives = FusedRows(features)
    else:
        primitives = MatvecReductions(features, statistics_dtype(x.dtype))
    return flat(x), flat(gamma), flat(beta), primitives, restore


def normalize(kernel, x, gamma, beta, axes, epsilon, output_dtype):
    """`kernel(x, gamma, beta, primitives, epsilon, output_dtype)` on the view
    this call's route picks, reshaped back to `x`'s shape."""
    rank = x.shape.rank
    x2, gamma2, beta2, primitives, restore = primitives_for(x, gamma, beta, axes, rank)
    return restore(kernel(x2, gamma2, beta2, primitives, epsilon, output_dtype))

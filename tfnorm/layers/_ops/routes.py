"""Which primitives serve a formula call (its route), and the [rows,
features] view the formula then runs on.

How the passes over memory are best spent depends on where the formula
runs, so each formula is written once against the primitives
(`primitives`) and one implementation of them is picked per call:

* CPU, float32, trailing axes (the usual case): "fused", `FusedRows`.
* CPU, float64, or float32 under XLA where `XLA_PREFERS_MATVEC` (trailing
  axes): "matvec", `MatvecReductions`.
* GPU (float32 matmuls may run in TF32 there) and other axes: "reduce",
  plain `Reductions`.
"""

from __future__ import annotations

import math

from tfnorm._keras import XLA_PREFERS_MATVEC, in_xla_context, tf
from tfnorm.layers._ops.primitives import FusedRows, MatvecReductions, Reductions

_MATVEC_REDUCTIONS = None

#: Route override for tests: None (pick per call), "fused" (float32 only),
#: "matvec" or "reduce".
ROUTE_OVERRIDE = None


def _use_matvec():
    global _MATVEC_REDUCTIONS
    if _MATVEC_REDUCTIONS is None:
        _MATVEC_REDUCTIONS = not tf.config.list_physical_devices("GPU")
    return _MATVEC_REDUCTIONS


def _trailing(axes, rank):
    return list(axes) == list(range(rank - len(axes), rank))


def route(x, axes, rank):
    """This call's route: "fused", "matvec" or "reduce"."""
    if ROUTE_OVERRIDE is not None:
        return ROUTE_OVERRIDE
    if not _use_matvec() or not _trailing(axes, rank):
        return "reduce"
    if x.dtype == tf.float32 and not (XLA_PREFERS_MATVEC and in_xla_context()):
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
        primitives = MatvecReductions(features, x.dtype)
    return flat(x), flat(gamma), flat(beta), primitives, restore


def normalize(kernel, x, gamma, beta, axes, epsilon):
    """`kernel(x, gamma, beta, primitives, epsilon)` on the view this call's
    route picks, reshaped back to `x`'s shape."""
    rank = x.shape.rank
    x2, gamma2, beta2, primitives, restore = primitives_for(x, gamma, beta, axes, rank)
    return restore(kernel(x2, gamma2, beta2, primitives, epsilon))

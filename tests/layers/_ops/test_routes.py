"""The route a formula call takes (`tfnorm.layers._ops.routes`)."""

from __future__ import annotations

import pytest

from tfnorm._keras import XLA_PREFERS_MATVEC, in_xla_context, tf
from tfnorm.layers._ops import routes


def test_routes_picked_on_cpu():
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("GPU machines take the plain reductions")
    assert routes.route(tf.zeros([2, 3]), [1], 2) == "fused"
    assert routes.route(tf.zeros([2, 3], tf.float64), [1], 2) == "matvec"
    assert routes.route(tf.zeros([2, 3, 4]), [1], 3) == "reduce"
    seen = []

    def under_xla():
        seen.append(routes.route(tf.zeros([2, 3]), [1], 2))
        return tf.constant(0)

    tf.function(under_xla, jit_compile=True)()
    assert seen == ["matvec" if XLA_PREFERS_MATVEC else "fused"]


def test_in_xla_context_tells_jit_compile_apart():
    seen = {}

    def probe(key):
        def fn():
            seen[key] = in_xla_context()
            return tf.constant(0)

        return fn

    probe("eager")()
    tf.function(probe("graph"))()
    tf.function(probe("xla"), jit_compile=True)()
    assert seen == {"eager": False, "graph": False, "xla": True}

"""The formulas of `tfnorm.layers._ops` through each of their routes.

The layers pick a route per call (fused kernels for float32 on CPU, matvecs
for float64, plain reductions on GPU and for other axes); these tests force
each one so that all stay covered whatever this machine picks, in graph mode
and under XLA. Inputs far from zero next to their spread and inputs whose
squares overflow float32 take the careful path; both paths are compared with
float64 references.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.layers import reference
from tfnorm._keras import XLA_PREFERS_MATVEC, in_xla_context, tf
from tfnorm.layers import _ops

FLOAT32_ROUTES = ["fused", "matvec", "reduce"]
MODES = {"eager": None, "graph": False, "xla": True}


@pytest.fixture(params=FLOAT32_ROUTES)
def route(request, monkeypatch):
    monkeypatch.setattr(_ops, "_ROUTE", request.param)
    return request.param


def _run(fn, mode):
    if MODES[mode] is None:
        return fn()
    return tf.function(fn, jit_compile=MODES[mode])()


def _params(features, seed=3):
    rng = np.random.default_rng(seed)
    gamma = (1 + 0.5 * rng.standard_normal(features)).astype(np.float32)
    beta = (0.5 * rng.standard_normal(features)).astype(np.float32)
    return gamma, beta


def _rows(*rows):
    return np.stack(rows).astype(np.float32)


def _layer_norm(x, gamma, beta, epsilon, mode):
    shape = [1] * (x.ndim - 1) + [-1]

    def fn():
        return _ops.layer_norm(
            tf.constant(x),
            tf.reshape(gamma, shape),
            tf.reshape(beta, shape),
            [x.ndim - 1],
            epsilon,
        )

    return np.asarray(_run(fn, mode), np.float64)


def _rms_norm(x, gamma, beta, epsilon, mode):
    def fn():
        return _ops.rms_norm(
            tf.constant(x),
            tf.constant(gamma[None]),
            tf.constant(beta[None]),
            [1],
            epsilon,
        )

    return np.asarray(_run(fn, mode), np.float64)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("offset", [0.0, 3.0, 1e2, 1e4, -1e4])
def test_layer_norm_stays_accurate_far_from_zero(route, mode, offset):
    # |x| ~ 1e4 with unit spread: a plain float32 mean is off by ~1e-3 there
    # (Keras 2.9's fused kernel by ~1e-2), in every output. Offsets past 8
    # standard deviations take the careful path in graph mode.
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((6, 8, 64)) + offset).astype(np.float32)
    gamma, beta = _params(64)
    expected = reference.layer_norm(x.astype(np.float64), gamma, beta, -1, 1e-3)
    actual = _layer_norm(x, gamma, beta, 1e-3, mode)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("mode", list(MODES))
def test_layer_norm_rows_mix_fast_and_careful(route, mode):
    # One row far from zero sends the whole batch through the careful path;
    # the rows near zero must come out as they would alone.
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 32)).astype(np.float32)
    x[2] += 1e4
    gamma, beta = _params(32)
    expected = reference.layer_norm(x.astype(np.float64), gamma, beta, -1, 1e-5)
    np.testing.assert_allclose(
        _layer_norm(x, gamma, beta, 1e-5, mode), expected, atol=1e-5
    )


def _huge_rows(features, rng):
    return _rows(
        rng.standard_normal(features) * 1e19,
        rng.standard_normal(features) * 1e30,
        rng.standard_normal(features) * 1e29 + 1e30,
        rng.standard_normal(features),
    )


@pytest.mark.parametrize("mode", list(MODES))
def test_layer_norm_of_rows_whose_squares_overflow_float32(route, mode):
    # The float32 sum of squares of these rows is inf: without rescaling,
    # 1 / std is 0 and the outputs are all beta.
    x = _huge_rows(48, np.random.default_rng(11))
    gamma, beta = _params(48)
    expected = reference.layer_norm(x.astype(np.float64), gamma, beta, -1, 1e-5)
    np.testing.assert_allclose(
        _layer_norm(x, gamma, beta, 1e-5, mode), expected, atol=1e-5
    )


@pytest.mark.parametrize("mode", list(MODES))
def test_rms_norm_of_rows_whose_squares_overflow_float32(route, mode):
    x = _huge_rows(48, np.random.default_rng(12))
    gamma, beta = _params(48)
    expected = reference.rms_norm(x.astype(np.float64), gamma, beta, -1, 1e-6)
    np.testing.assert_allclose(
        _rms_norm(x, gamma, beta, 1e-6, mode), expected, atol=1e-5
    )


@pytest.mark.parametrize("mode", list(MODES))
def test_scale_norm_of_rows_whose_squares_overflow_float32(mode):
    x = _huge_rows(48, np.random.default_rng(13))

    def fn():
        return _ops.scale_norm(tf.constant(x), tf.constant(2.5), [1], 1e-5)

    expected = reference.scale_norm(x.astype(np.float64), 2.5, -1, 1e-5)
    np.testing.assert_allclose(np.asarray(_run(fn, mode)), expected, atol=1e-5)


def _autodiff_layer_norm(x, gamma, beta):
    mean = tf.reduce_mean(x, -1, keepdims=True)
    var = tf.reduce_mean(tf.square(x - mean), -1, keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + 1e-5) * gamma + beta


def _autodiff_rms_norm(x, gamma, beta):
    return (
        x
        * tf.math.rsqrt(tf.reduce_mean(tf.square(x), -1, keepdims=True) + 1e-5)
        * gamma
        + beta
    )


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("scale_by, offset", [(1.0, 0.5), (1.0, 1e2), (1e19, 0.0)])
@pytest.mark.parametrize(
    "formula, autodiff",
    [(_ops.layer_norm, _autodiff_layer_norm), (_ops.rms_norm, _autodiff_rms_norm)],
    ids=["layer_norm", "rms_norm"],
)
def test_gradients_match_float64_autodiff_on_both_paths(
    route, formula, autodiff, scale_by, offset, jit_compile
):
    # Offset 0.5 takes the fast path; offset 1e2 (100 standard deviations,
    # LayerNorm) and magnitudes of 1e19 (squares overflow) the careful one.
    rng = np.random.default_rng(2)
    x = ((rng.standard_normal((3, 4, 16)) + offset) * scale_by).astype(np.float32)
    weights = rng.standard_normal((3, 4, 16)).astype(np.float32)
    gamma, beta = (p[None, None] for p in _params(16))

    @tf.function(jit_compile=jit_compile)
    def ours():
        xs, g, b = tf.constant(x), tf.constant(gamma), tf.constant(beta)
        with tf.GradientTape() as tape:
            tape.watch([xs, g, b])
            loss = tf.reduce_sum(formula(xs, g, b, [2], 1e-5) * weights)
        return tape.gradient(loss, [xs, g, b])

    xs, g, b = (tf.constant(t, tf.float64) for t in (x, gamma, beta))
    with tf.GradientTape() as tape:
        tape.watch([xs, g, b])
        loss = tf.reduce_sum(autodiff(xs, g, b) * weights.astype(np.float64))
    expected = tape.gradient(loss, [xs, g, b])
    for actual, want in zip(ours(), expected):
        want = np.asarray(want)
        np.testing.assert_allclose(
            np.asarray(actual), want, rtol=1e-4, atol=1e-4 * np.abs(want).max()
        )


def test_routes_picked_on_cpu():
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("GPU machines take the plain reductions")
    assert _ops._route(tf.zeros([2, 3]), [1], 2) == "fused"
    assert _ops._route(tf.zeros([2, 3], tf.float64), [1], 2) == "matvec"
    assert _ops._route(tf.zeros([2, 3, 4]), [1], 3) == "reduce"
    seen = []

    def under_xla():
        seen.append(_ops._route(tf.zeros([2, 3]), [1], 2))
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

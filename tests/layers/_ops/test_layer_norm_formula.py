"""`_ops.layer_norm` through each route (the `route` fixture), eagerly, in
graph mode and under XLA.

Inputs far from zero next to their spread and inputs whose squares overflow
float32 take the careful path; both paths are compared with float64
references.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.layers import reference
from tests.layers._ops.helpers import (
    MODES,
    assert_gradients_match_float64_autodiff,
    huge_rows,
    params,
    run,
)
from tfnorm._keras import tf
from tfnorm.layers import _ops


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

    return np.asarray(run(fn, mode), np.float64)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("offset", [0.0, 3.0, 1e2, 1e4, -1e4])
def test_layer_norm_stays_accurate_far_from_zero(route, mode, offset):
    # |x| ~ 1e4 with unit spread: a plain float32 mean is off by ~1e-3 there
    # (Keras 2.9's fused kernel by ~1e-2), in every output. Offsets past 8
    # standard deviations take the careful path in graph mode.
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((6, 8, 64)) + offset).astype(np.float32)
    gamma, beta = params(64)
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
    gamma, beta = params(32)
    expected = reference.layer_norm(x.astype(np.float64), gamma, beta, -1, 1e-5)
    np.testing.assert_allclose(
        _layer_norm(x, gamma, beta, 1e-5, mode), expected, atol=1e-5
    )


@pytest.mark.parametrize("mode", list(MODES))
def test_layer_norm_of_rows_whose_squares_overflow_float32(route, mode):
    # The float32 sum of squares of these rows is inf: without rescaling,
    # 1 / std is 0 and the outputs are all beta.
    x = huge_rows(48, np.random.default_rng(11))
    gamma, beta = params(48)
    expected = reference.layer_norm(x.astype(np.float64), gamma, beta, -1, 1e-5)
    np.testing.assert_allclose(
        _layer_norm(x, gamma, beta, 1e-5, mode), expected, atol=1e-5
    )


def _autodiff_layer_norm(x, gamma, beta):
    mean = tf.reduce_mean(x, -1, keepdims=True)
    var = tf.reduce_mean(tf.square(x - mean), -1, keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + 1e-5) * gamma + beta


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("scale_by, offset", [(1.0, 0.5), (1.0, 1e2), (1e19, 0.0)])
def test_gradients_match_float64_autodiff_on_both_paths(
    route, scale_by, offset, jit_compile
):
    # Offset 0.5 takes the fast path; offset 1e2 (100 standard deviations)
    # and magnitudes of 1e19 (squares overflow) the careful one.
    assert_gradients_match_float64_autodiff(
        _ops.layer_norm, _autodiff_layer_norm, scale_by, offset, jit_compile
    )

"""`_ops.rms_norm` through each route (the `route` fixture), eagerly, in
graph mode and under XLA: rows whose squares overflow float32 take the
careful path; both paths are compared with float64 references."""

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


@pytest.mark.parametrize("mode", list(MODES))
def test_rms_norm_of_rows_whose_squares_overflow_float32(route, mode):
    x = huge_rows(48, np.random.default_rng(12))
    gamma, beta = params(48)

    def fn():
        return _ops.rms_norm(
            tf.constant(x),
            tf.constant(gamma[None]),
            tf.constant(beta[None]),
            [1],
            1e-6,
        )

    expected = reference.rms_norm(x.astype(np.float64), gamma, beta, -1, 1e-6)
    np.testing.assert_allclose(
        np.asarray(run(fn, mode), np.float64), expected, atol=1e-5
    )


def _autodiff_rms_norm(x, gamma, beta):
    return (
        x
        * tf.math.rsqrt(tf.reduce_mean(tf.square(x), -1, keepdims=True) + 1e-5)
        * gamma
        + beta
    )


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("scale_by, offset", [(1.0, 0.5), (1.0, 1e2), (1e19, 0.0)])
def test_gradients_match_float64_autodiff_on_both_paths(
    route, scale_by, offset, jit_compile
):
    # Magnitudes of 1e19 (squares overflow) take the careful path.
    assert_gradients_match_float64_autodiff(
        _ops.rms_norm, _autodiff_rms_norm, scale_by, offset, jit_compile
    )

"""`_ops.scale_norm` eagerly, in graph mode and under XLA, against a float64
reference."""

from __future__ import annotations

import numpy as np
import pytest

from tests.layers import reference
from tests.layers._ops.helpers import MODES, huge_rows, run
from tfnorm._keras import tf
from tfnorm.layers import _ops


@pytest.mark.parametrize("mode", list(MODES))
def test_scale_norm_of_rows_whose_squares_overflow_float32(mode):
    x = huge_rows(48, np.random.default_rng(13))

    def fn():
        return _ops.scale_norm(tf.constant(x), tf.constant(2.5), [1], 1e-5)

    expected = reference.scale_norm(x.astype(np.float64), 2.5, -1, 1e-5)
    np.testing.assert_allclose(np.asarray(run(fn, mode)), expected, atol=1e-5)

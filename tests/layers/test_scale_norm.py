from __future__ import annotations

import math

import numpy as np
import pytest

import tfnorm
from tests.layers import reference
from tests.testing import assert_close, random_input
from tfnorm._keras import tf


def test_scale_starts_at_sqrt_of_feature_count():
    layer = tfnorm.ScaleNorm(axis=[1, 2])
    layer.build((2, 3, 4))
    assert layer.weights[0].shape == ()
    np.testing.assert_allclose(
        float(layer.weights[0].numpy()), math.sqrt(12), rtol=1e-6
    )


@pytest.mark.parametrize("epsilon", [1e-12, 1e-5, 1e-3])
def test_matches_float64_reference(epsilon):
    x = random_input((2, 3, 4, 6), seed=3, spread=2.0)
    layer = tfnorm.ScaleNorm(axis=[-1, 1], epsilon=epsilon)
    layer.build(x.shape)
    layer.set_weights([np.float32(1.7)])
    assert_close(
        layer(x), reference.scale_norm(x.astype(np.float64), 1.7, [-1, 1], epsilon)
    )


def test_all_zero_rows_give_zero_output_and_finite_gradients():
    x = tf.constant(np.zeros((2, 8), np.float32))
    layer = tfnorm.ScaleNorm()
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
        loss = tf.reduce_sum(y)
    grads = tape.gradient(loss, [x] + layer.trainable_weights)
    np.testing.assert_array_equal(np.asarray(y), np.zeros((2, 8)))
    for g in grads:
        assert np.all(np.isfinite(np.asarray(g)))


def test_gradient_matches_numerical():
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((3, 5)), tf.float64)
    layer = tfnorm.ScaleNorm(dtype="float64")
    layer.build(x.shape)

    theoretical, numerical = tf.test.compute_gradient(layer, [x])
    np.testing.assert_allclose(theoretical[0], numerical[0], rtol=1e-6, atol=1e-6)

"""What only DynamicTanh does (the contract it shares is in test_norm_contract)."""

from __future__ import annotations

import numpy as np
import pytest

import tfnorm
from tests.layers import reference
from tests.testing import random_input
from tfnorm._keras import tf


def test_alpha_starts_at_the_papers_half_and_outputs_stay_bounded():
    layer = tfnorm.DynamicTanh()
    x = random_input((4, 16), spread=1e4)  # no statistic: any scale is fine
    y = np.asarray(layer(x))
    assert float(layer.alpha.numpy()) == 0.5
    assert np.all(np.abs(y) <= 1.0)
    np.testing.assert_allclose(y, np.tanh(0.5 * x.astype("float64")), rtol=1e-6)


@pytest.mark.parametrize("value", [None, True, "half"])
def test_alpha_initializer_must_be_a_number_or_an_initializer(value):
    with pytest.raises(ValueError, match="alpha_initializer"):
        tfnorm.DynamicTanh(alpha_initializer=value)


def test_alpha_initializer_accepts_keras_initializers():
    layer = tfnorm.DynamicTanh(alpha_initializer="ones")
    layer.build((2, 3))
    assert float(layer.alpha.numpy()) == 1.0


@pytest.mark.parametrize("jit_compile", [False, True])
def test_gradients_match_the_formula_in_graph_and_xla(jit_compile):
    layer = tfnorm.DynamicTanh(alpha_initializer=0.8)
    x = tf.constant(random_input((3, 6), seed=5, spread=2.0))
    layer.build(x.shape)

    @tf.function(jit_compile=jit_compile)
    def grads():
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x) ** 2)
        return tape.gradient(loss, [x, layer.alpha, layer.gamma, layer.beta])

    dx, d_alpha, d_gamma, d_beta = (np.asarray(g, "float64") for g in grads())
    x64 = np.asarray(x, "float64")
    t = np.tanh(0.8 * x64)
    y = reference.dynamic_tanh(x64, 0.8, np.ones(6), np.zeros(6))
    d_t = 2 * y * (1 - t**2)
    np.testing.assert_allclose(dx, d_t * 0.8, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(d_alpha, np.sum(d_t * x64), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(d_gamma, np.sum(2 * y * t, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(d_beta, np.sum(2 * y, 0), rtol=1e-5, atol=1e-6)

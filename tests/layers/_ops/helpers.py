"""Inputs and runners shared by the formula tests."""

from __future__ import annotations

import numpy as np

from tfnorm._keras import tf

MODES = {"eager": None, "graph": False, "xla": True}


def run(fn, mode):
    if MODES[mode] is None:
        return fn()
    return tf.function(fn, jit_compile=MODES[mode])()


def params(features, seed=3):
    rng = np.random.default_rng(seed)
    gamma = (1 + 0.5 * rng.standard_normal(features)).astype(np.float32)
    beta = (0.5 * rng.standard_normal(features)).astype(np.float32)
    return gamma, beta


def huge_rows(features, rng):
    """Rows whose float32 sums of squares overflow, and one that does not."""
    return np.stack(
        [
            rng.standard_normal(features) * 1e19,
            rng.standard_normal(features) * 1e30,
            rng.standard_normal(features) * 1e29 + 1e30,
            rng.standard_normal(features),
        ]
    ).astype(np.float32)


def assert_gradients_match_float64_autodiff(
    formula, autodiff, scale_by, offset, jit_compile
):
    """The gradients of `formula` (float32, axes [2]) against float64
    autodiff of the plain formula `autodiff`."""
    rng = np.random.default_rng(2)
    x = ((rng.standard_normal((3, 4, 16)) + offset) * scale_by).astype(np.float32)
    weights = rng.standard_normal((3, 4, 16)).astype(np.float32)
    gamma, beta = (p[None, None] for p in params(16))

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

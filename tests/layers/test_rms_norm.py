from __future__ import annotations

import numpy as np
import pytest

import tfnorm
from tests.layers import reference
from tests.testing import assert_close, random_input, randomize_weights
from tfnorm._keras import keras_rms_normalization, tf
from tfnorm.layers import _ops


@pytest.mark.parametrize("epsilon", [1e-12, 1e-5, 1e-3])
@pytest.mark.parametrize(
    "shape, axis",
    [
        ((7, 16), -1),
        ((2, 5, 16), [1, 2]),
        ((2, 3, 4, 6), [2, 0]),
        ((2, 3, 2, 4, 5), -2),
    ],
)
def test_matches_float64_reference(shape, axis, epsilon):
    layer = tfnorm.RMSNorm(axis=axis, epsilon=epsilon, center=True)
    x = random_input(shape, seed=3, offset=0.5, spread=3.0)
    layer.build(shape)
    randomize_weights(layer)
    gamma, beta = (np.asarray(w, np.float64) for w in layer.get_weights())
    expected = reference.rms_norm(x.astype(np.float64), gamma, beta, axis, epsilon)
    assert_close(layer(x), expected)


@pytest.mark.skipif(
    keras_rms_normalization() is None,
    reason="keras.layers.RMSNormalization exists only from Keras 3.9",
)
@pytest.mark.parametrize(
    "axis, shape",
    # Keras's own layer fails on mixed-sign lists ([1, -1]): not compared.
    [
        (-1, (3, 4, 16)),
        ([-1, -2], (3, 4, 16)),
        ([-2, -1], (3, 4, 16)),
        ([2, 1], (2, 4, 4)),
    ],
)
def test_matches_keras_rms_normalization(axis, shape):
    x = random_input(shape, seed=4)
    ours = tfnorm.RMSNorm(axis=axis, epsilon=1e-6)
    theirs = keras_rms_normalization()(axis=axis, epsilon=1e-6)
    ours.build(x.shape)
    theirs.build(x.shape)
    assert [tuple(w.shape) for w in ours.weights] == [
        tuple(w.shape) for w in theirs.weights
    ]
    randomize_weights(theirs)
    ours.set_weights(theirs.get_weights())
    np.testing.assert_allclose(np.asarray(ours(x)), np.asarray(theirs(x)), atol=1e-6)
    assert tfnorm.RMSNorm.from_config(theirs.get_config()).epsilon == 1e-6


def test_zero_centered_gamma_scales_by_one_plus_weight():
    x = random_input((2, 8), seed=5)
    layer = tfnorm.RMSNorm(zero_centered_gamma=True)
    layer.build(x.shape)
    # Starts as the identity scale: s = 0, scale 1 + s = 1.
    np.testing.assert_array_equal(layer.get_weights()[0], np.zeros(8, np.float32))
    assert_close(layer(x), reference.rms_norm(x.astype(np.float64)))
    layer.set_weights([np.full(8, 0.5, np.float32)])
    assert_close(layer(x), 1.5 * reference.rms_norm(x.astype(np.float64)))


def test_partial_uses_only_leading_features_for_the_statistic():
    x = random_input((2, 8), seed=6)
    layer = tfnorm.RMSNorm(partial=0.25, scale=False)  # ceil(0.25 * 8) = 2
    y = np.asarray(layer(x))
    changed = x.copy()
    changed[:, 2:] *= 10.0  # features the statistic does not read
    y_changed = np.asarray(layer(changed))
    np.testing.assert_allclose(y_changed[:, :2], y[:, :2], rtol=1e-6)
    assert not np.allclose(
        np.asarray(tfnorm.RMSNorm(scale=False)(changed))[:, :2], y[:, :2]
    )


@pytest.mark.parametrize("partial", [0.0, -0.5, 1.5, "half", True])
def test_partial_out_of_range_is_rejected(partial):
    with pytest.raises(ValueError, match="partial"):
        tfnorm.RMSNorm(partial=partial)


def test_partial_with_several_axes_is_rejected():
    with pytest.raises(ValueError, match="partial"):
        tfnorm.RMSNorm(axis=[1, 2], partial=0.5).build((2, 3, 4))


@pytest.mark.parametrize("matvec", [True, False], ids=["matvec", "reduce"])
@pytest.mark.parametrize("center", [False, True])
def test_analytic_gradient_matches_numerical(center, matvec, monkeypatch):
    monkeypatch.setattr(
        "tfnorm.layers._ops.routes.ROUTE_OVERRIDE", "matvec" if matvec else "reduce"
    )
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((3, 2, 5)) * 2 + 0.5, tf.float64)
    gamma = tf.constant(1 + 0.5 * rng.standard_normal((1, 1, 5)), tf.float64)
    beta = tf.constant(0.5 * rng.standard_normal((1, 1, 5)), tf.float64)

    def f(x, gamma, beta):
        return _ops.rms_norm(x, gamma, beta if center else None, [2], 1e-6)

    theoretical, numerical = tf.test.compute_gradient(f, [x, gamma, beta])
    for t, n in zip(theoretical, numerical):
        np.testing.assert_allclose(t, n, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_analytic_gradient_matches_autodiff(jit_compile):
    x = tf.constant(random_input((4, 6, 16), seed=2, offset=1.0))
    layer = tfnorm.RMSNorm(center=True)
    layer.build(x.shape)
    randomize_weights(layer)
    gamma, beta = (tf.constant(w) for w in layer.get_weights())

    @tf.function(jit_compile=jit_compile)
    def grads():
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([x, gamma, beta])
            ours = tf.reduce_sum(layer(x) * tf.sin(x))
            plain = x * tf.math.rsqrt(tf.reduce_mean(x * x, -1, keepdims=True) + 1e-6)
            ref = tf.reduce_sum((plain * gamma + beta) * tf.sin(x))
        return (
            tape.gradient(ours, [x] + layer.trainable_weights),
            tape.gradient(ref, [x, gamma, beta]),
        )

    ours, ref = grads()
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_half_precision_inputs_up_to_6e4_stay_finite(policy, mixed_policy):
    x32 = random_input((4, 64), seed=8, spread=3e4).clip(-6e4, 6e4)
    mixed_policy(policy)
    layer = tfnorm.RMSNorm()
    half = tf.float16 if policy == "mixed_float16" else tf.bfloat16
    x_half = tf.cast(x32, half)
    y = layer(x_half)
    assert y.dtype == half and layer.weights[0].dtype == tf.float32
    expected = reference.rms_norm(np.asarray(tf.cast(x_half, tf.float64)))
    actual = np.asarray(tf.cast(y, tf.float64))
    assert np.all(np.isfinite(actual))
    resolution = 2.0**-10 if policy == "mixed_float16" else 2.0**-7
    np.testing.assert_allclose(
        actual, expected, atol=2 * resolution * np.abs(expected).max()
    )


@pytest.mark.parametrize("key", ["center", "scale", "zero_centered_gamma"])
def test_boolean_arguments_must_be_real_booleans(key):
    with pytest.raises(ValueError, match=rf"`{key}` must be True or False.*'false'"):
        tfnorm.RMSNorm(**{key: "false"})

from __future__ import annotations

import numpy as np
import pytest

import tfnorm
from tests.layers import reference
from tests.testing import assert_close, random_input, randomize_weights, run_layer_test
from tfnorm._keras import keras, tf
from tfnorm.layers import _ops


def _reference(axis=-1, epsilon=1e-3, center=True, scale=True):
    def ref(x, weights):
        weights = list(weights)
        gamma = weights.pop(0) if scale else None
        beta = weights.pop(0) if center else None
        return reference.layer_norm(x, gamma, beta, axis, epsilon)

    return ref


@pytest.mark.parametrize(
    "kwargs, shape",
    [
        ({}, (2, 5, 8)),
        ({"center": False}, (2, 5, 8)),
        ({"scale": False, "epsilon": 1e-3}, (2, 5, 8)),
        ({"axis": [1, 2]}, (2, 3, 4)),
        ({"axis": [-3, -1]}, (2, 3, 4, 5)),
    ],
    ids=["default", "no_center", "no_scale", "two_axes", "non_contiguous"],
)
def test_layer_contract(kwargs, shape):
    num_weights = int(kwargs.get("center", True)) + int(kwargs.get("scale", True))
    run_layer_test(
        tfnorm.LayerNormalization,
        kwargs,
        shape,
        expected_num_trainable_weights=num_weights,
        reference=_reference(**kwargs),
        check_reload=kwargs == {} or "axis" in kwargs and len(shape) == 4,
    )


GRID_SHAPES_AXES = [
    ((7, 16), -1),
    ((2, 5, 16), -1),
    ((2, 5, 16), [1, 2]),
    ((2, 3, 4, 6), [-1, -3]),
    ((2, 3, 4, 6), [2, 1]),
    ((2, 3, 2, 4, 5), [1, 4]),
]


@pytest.mark.parametrize("epsilon", [1e-12, 1e-5, 1e-3])
@pytest.mark.parametrize("shape, axis", GRID_SHAPES_AXES)
def test_matches_float64_reference(shape, axis, epsilon):
    layer = tfnorm.LayerNormalization(axis=axis, epsilon=epsilon)
    x = random_input(shape, seed=3, offset=1.5, spread=3.0)
    layer.build(shape)
    randomize_weights(layer)
    gamma, beta = (np.asarray(w, np.float64) for w in layer.get_weights())
    expected = reference.layer_norm(x.astype(np.float64), gamma, beta, axis, epsilon)
    assert_close(layer(x), expected)


@pytest.mark.parametrize("epsilon", [1e-5, 1e-3])
@pytest.mark.parametrize("axis", [-1, [1, 2]])
def test_same_outputs_and_weights_as_keras_builtin(axis, epsilon):
    x = random_input((3, 4, 6), seed=4, offset=2.0)
    ours = tfnorm.LayerNormalization(axis=axis, epsilon=epsilon)
    theirs = keras.layers.LayerNormalization(axis=axis, epsilon=epsilon)
    ours.build(x.shape)
    theirs.build(x.shape)
    assert [tuple(w.shape) for w in ours.weights] == [
        tuple(w.shape) for w in theirs.weights
    ]
    randomize_weights(theirs)
    ours.set_weights(theirs.get_weights())
    np.testing.assert_allclose(np.asarray(ours(x)), np.asarray(theirs(x)), atol=1e-5)
    # And back: our weights load into Keras's layer unchanged.
    randomize_weights(ours, seed=7)
    theirs.set_weights(ours.get_weights())
    np.testing.assert_allclose(np.asarray(ours(x)), np.asarray(theirs(x)), atol=1e-5)


def test_large_inputs_stay_accurate():
    # Inputs around 1e4 with unit spread. A float32 mean of such values is
    # off by ~1e-3 (the float32 spacing at 1e4), and forms that compute
    # x * inv + (beta - mean * inv) round x * inv at that magnitude too: both
    # give errors around 1e-3 here. Ours stays at float32 resolution.
    x = random_input((4, 64), seed=5, offset=1e4, spread=1.0)
    layer = tfnorm.LayerNormalization()
    layer.build(x.shape)
    randomize_weights(layer)
    gamma, beta = (np.asarray(w, np.float64) for w in layer.get_weights())
    expected = reference.layer_norm(x.astype(np.float64), gamma, beta)
    np.testing.assert_allclose(np.asarray(layer(x)), expected, atol=2e-5)


@pytest.mark.parametrize("matvec", [True, False], ids=["matvec", "reduce"])
@pytest.mark.parametrize("center, scale", [(True, True), (False, True), (True, False)])
@pytest.mark.parametrize(
    "shape, axes", [((3, 5), (1,)), ((2, 3, 4), (1, 2)), ((2, 3, 4), (0, 2))]
)
def test_analytic_gradient_matches_numerical(
    shape, axes, center, scale, matvec, monkeypatch
):
    # matvec: CPU reductions as matrix-vector products (trailing axes only);
    # reduce: the plain reductions used on GPU and for other axes.
    monkeypatch.setattr(_ops, "_MATVEC_REDUCTIONS", matvec)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal(shape) * 2 + 1, tf.float64)
    param_shape = [shape[a] if a in axes else 1 for a in range(len(shape))]
    gamma = tf.constant(1 + 0.5 * rng.standard_normal(param_shape), tf.float64)
    beta = tf.constant(0.5 * rng.standard_normal(param_shape), tf.float64)

    def f(x, gamma, beta):
        return _ops.layer_norm(
            x, gamma if scale else None, beta if center else None, axes, 1e-5
        )

    theoretical, numerical = tf.test.compute_gradient(f, [x, gamma, beta])
    for t, n in zip(theoretical, numerical):
        np.testing.assert_allclose(t, n, rtol=1e-6, atol=1e-6)


def _autodiff_layer_norm(x, gamma, beta, axes, epsilon):
    mean = tf.reduce_mean(x, axes, keepdims=True)
    var = tf.reduce_mean(tf.square(x - mean), axes, keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + epsilon) * gamma + beta


@pytest.mark.parametrize("jit_compile", [False, True])
def test_analytic_gradient_matches_autodiff_in_graph_and_xla(jit_compile):
    x = tf.constant(random_input((4, 6, 16), seed=2, offset=3.0))
    layer = tfnorm.LayerNormalization(epsilon=1e-5)
    layer.build(x.shape)
    randomize_weights(layer)
    gamma, beta = (tf.constant(w) for w in layer.get_weights())

    @tf.function(jit_compile=jit_compile)
    def grads():
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([x, gamma, beta])
            ours = tf.reduce_sum(layer(x) * tf.sin(x))
            ref = tf.reduce_sum(
                _autodiff_layer_norm(x, gamma, beta, [2], 1e-5) * tf.sin(x)
            )
        return (
            tape.gradient(ours, [x] + layer.trainable_weights),
            tape.gradient(ref, [x, gamma, beta]),
        )

    ours, ref = grads()
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-4)


def test_gradient_under_mixed_precision_is_float32_and_finite(mixed_policy):
    mixed_policy("mixed_float16")
    layer = tfnorm.LayerNormalization()
    x = tf.constant(
        random_input((4, 32), seed=6, offset=100.0, spread=50.0), tf.float16
    )
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
        loss = tf.reduce_sum(tf.cast(y, tf.float32) ** 2 * 0.0 + tf.cast(y, tf.float32))
    dx, dgamma, dbeta = tape.gradient(loss, [x] + layer.trainable_weights)
    assert y.dtype == tf.float16
    assert dgamma.dtype == tf.float32 and dbeta.dtype == tf.float32
    assert np.all(np.isfinite(np.asarray(tf.cast(dx, tf.float32))))
    # d(sum y)/d beta is the number of rows; d/d gamma is the sum of x_hat.
    np.testing.assert_allclose(np.asarray(dbeta), np.full(32, 4.0))


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_half_precision_statistics_are_float32(policy, mixed_policy):
    # Inputs up to 6e4: their squares overflow float16 (max 65504), so
    # statistics in the input dtype would give inf/NaN.
    x32 = random_input((4, 64), seed=8, offset=3e4, spread=2e4).clip(-6e4, 6e4)
    mixed_policy(policy)
    layer = tfnorm.LayerNormalization()
    half = tf.float16 if policy == "mixed_float16" else tf.bfloat16
    x_half = tf.cast(x32, half)
    y = layer(x_half)
    assert y.dtype == half
    assert [w.dtype for w in layer.weights] == [tf.float32, tf.float32]
    expected = reference.layer_norm(np.asarray(tf.cast(x_half, tf.float64)))
    resolution = 2.0**-10 if policy == "mixed_float16" else 2.0**-7
    actual = np.asarray(tf.cast(y, tf.float64))
    assert np.all(np.isfinite(actual))
    np.testing.assert_allclose(
        actual, expected, atol=2 * resolution * np.abs(expected).max()
    )


def test_inside_mirrored_strategy_matches_single_device(two_device_strategy):
    x = random_input((4, 3, 8), seed=9, offset=1.0)
    single = tfnorm.LayerNormalization()
    single.build(x.shape)
    randomize_weights(single)
    with two_device_strategy.scope():
        mirrored = tfnorm.LayerNormalization()
        mirrored.build(x.shape)
        mirrored.set_weights(single.get_weights())

    @tf.function
    def step(batch):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(mirrored(batch) ** 2)
        return tape.gradient(loss, mirrored.trainable_weights)

    dataset = tf.data.Dataset.from_tensor_slices(x).batch(4)
    batch = next(iter(two_device_strategy.experimental_distribute_dataset(dataset)))
    per_replica = two_device_strategy.run(step, args=(batch,))
    grads = [
        two_device_strategy.reduce(tf.distribute.ReduceOp.SUM, g, axis=None)
        for g in per_replica
    ]
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(single(x) ** 2)
    expected = tape.gradient(loss, single.trainable_weights)
    for a, b in zip(grads, expected):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-4)

"""tfnorm/_keras/training.py: optimizers in custom training loops, either Keras."""

from __future__ import annotations

import numpy as np

from tfnorm import _keras
from tfnorm._keras import keras, tf


def test_a_trackable_optimizer_is_checkpointed_as_it_is():
    optimizer = keras.optimizers.Adam(1e-3)
    assert _keras.checkpointable_optimizer(optimizer) is optimizer


class _UntrackableOptimizer:
    """What Keras 3.0's optimizers are to `tf.train.Checkpoint`: state in
    `variables`, but no Trackable base class."""

    def __init__(self):
        self.variables = [
            tf.Variable(0, dtype=tf.int64, name="iteration"),
            tf.Variable(np.zeros(3, "float32"), name="momentum"),
        ]


def test_an_untrackable_optimizer_saves_and_restores_its_variables(tmp_path):
    saved = _UntrackableOptimizer()
    saved.variables[0].assign(7)
    saved.variables[1].assign([1.0, 2.0, 3.0])
    path = tf.train.Checkpoint(optimizer=_keras.checkpointable_optimizer(saved)).save(
        str(tmp_path / "ckpt")
    )

    restored = _UntrackableOptimizer()
    tf.train.Checkpoint(optimizer=_keras.checkpointable_optimizer(restored)).restore(
        path
    ).assert_existing_objects_matched()
    assert int(restored.variables[0].numpy()) == 7
    np.testing.assert_array_equal(restored.variables[1].numpy(), [1.0, 2.0, 3.0])


def _scaled_sgd():
    # Learning rate 1: a step moves each weight by exactly the gradient the
    # optimizer applied, so the weights say what it saw.
    return _keras.loss_scale_optimizer(keras.optimizers.SGD(1.0))


def _reported_step(optimizer, variable, x):
    """One step of `sum(variable * x)`, computed in float16 as a mixed
    precision layer would, in a compiled step as tfnorm's loops take it."""

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            half = tf.cast(variable, tf.float16) * tf.cast(x, tf.float16)
            loss = tf.cast(tf.reduce_sum(half), tf.float32)
            scaled = _keras.scale_loss(optimizer, loss)
        gradients = _keras.unscale_gradients(
            optimizer, tape.gradient(scaled, [variable])
        )
        applied, norm, _ = _keras.apply_gradients_and_report(
            optimizer, gradients, [variable]
        )
        return applied, norm

    applied, norm = step()
    return bool(applied), float(norm)


def test_a_loss_scaled_step_says_whether_the_optimizer_applied_it():
    variable = tf.Variable([1.0, 2.0, 3.0])
    optimizer = _scaled_sgd()
    _keras.build_optimizer(optimizer, [variable])
    # The loss (6e4) is finite in float16; its gradient x times the loss
    # scale (2**15) is not.
    applied, norm = _reported_step(optimizer, variable, tf.constant([6e4, 0.0, 0.0]))
    assert applied is False and not np.isfinite(norm)
    np.testing.assert_array_equal(variable.numpy(), [1.0, 2.0, 3.0])
    applied, norm = _reported_step(optimizer, variable, tf.constant([0.3, 0.0, 0.4]))
    assert applied is True
    # The norm is of the unscaled gradient (0.5, not 0.5 * 2**14), and is
    # the size of the step the optimizer took.
    step = np.array([1.0, 2.0, 3.0]) - variable.numpy()
    np.testing.assert_allclose(norm, np.linalg.norm(step), rtol=1e-6)
    np.testing.assert_allclose(step, [0.3, 0.0, 0.4], rtol=1e-3)


def test_a_plain_optimizer_applies_every_step():
    variable = tf.Variable([1.0, 2.0])
    optimizer = keras.optimizers.SGD(1.0)
    _keras.build_optimizer(optimizer, [variable])
    applied, norm = _reported_step(optimizer, variable, tf.constant([3.0, 4.0]))
    assert applied is True and norm == 5.0


def test_a_nan_row_beside_a_finite_row_of_the_same_token_is_skipped():
    # An embedding's gradient holds one row per position: token 1 appears
    # twice, first with a NaN gradient, then with a finite one. Keras 3's
    # own finiteness check let the last row stand for the token and applied
    # the NaN (Keras 3.15.1).
    tokens = keras.Input((2,), dtype="int32")
    model = keras.Model(tokens, keras.layers.Embedding(3, 2)(tokens))
    variables = model.trainable_variables
    optimizer = _scaled_sgd()
    _keras.build_optimizer(optimizer, variables)
    upstream = tf.constant([[[np.nan, 1.0], [1.0, 1.0]]])
    before = [v.numpy() for v in variables]

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(tf.constant([[1, 1]])) * upstream)
            scaled = _keras.scale_loss(optimizer, loss)
        gradients = tape.gradient(scaled, variables)
        assert isinstance(gradients[0], tf.IndexedSlices)
        gradients = _keras.unscale_gradients(optimizer, gradients)
        return _keras.apply_gradients_and_report(optimizer, gradients, variables)[:2]

    applied, norm = step()
    assert not bool(applied) and np.isnan(float(norm))
    for old, variable in zip(before, variables):
        np.testing.assert_array_equal(variable.numpy(), old)


def test_the_global_norm_of_finite_gradients_is_finite():
    big = tf.constant([3e20, 4e20])
    # Their squares overflow float32: tf.linalg.global_norm says Inf.
    np.testing.assert_allclose(float(_keras.global_norm([big, None])), 5e20, rtol=1e-6)
    assert float(_keras.global_norm([tf.constant([3.0]), tf.constant([4.0])])) == 5.0
    assert np.isnan(float(_keras.global_norm([big, tf.constant([np.nan])])))
    assert np.isinf(float(_keras.global_norm([big, tf.constant([-np.inf])])))
    assert float(_keras.global_norm([tf.zeros([2])])) == 0.0


def test_the_loss_scale_value_follows_the_optimizers_decisions():
    variable = tf.Variable([1.0, 2.0, 3.0])
    plain = keras.optimizers.SGD(1.0)
    assert float(_keras.loss_scale_value(plain)) == 1.0
    optimizer = _scaled_sgd()
    _keras.build_optimizer(optimizer, [variable])
    # Dynamic loss scaling starts at 2 ** 15 in every runtime.
    assert float(_keras.loss_scale_value(optimizer)) == 2.0**15
    _reported_step(optimizer, variable, tf.constant([6e4, 0.0, 0.0]))
    # A skipped step halves it.
    assert float(_keras.loss_scale_value(optimizer)) == 2.0**14
    _reported_step(optimizer, variable, tf.constant([0.3, 0.0, 0.4]))
    assert float(_keras.loss_scale_value(optimizer)) == 2.0**14

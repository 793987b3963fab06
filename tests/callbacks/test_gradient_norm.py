"""GradientNormCallback: per-layer gradient norms as TensorBoard scalars."""

from __future__ import annotations

import numpy as np
import pytest

import tfnorm
from tests.callbacks import models
from tfnorm._keras import keras, tf
from tfnorm.callbacks import GradientNormCallback


def _manual_norms(model, x, y):
    """Per-layer gradient norms of the mean squared error, by hand."""
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x, training=False) - y))
    layers = {
        "block_0/attention_norm": model.get_layer("block_0").get_layer(
            "attention_norm"
        ),
        "block_0/mix": model.get_layer("block_0").get_layer("mix"),
        "block_0/ffn_norm": model.get_layer("block_0").get_layer("ffn_norm"),
        "final_norm": model.get_layer("final_norm"),
        "head": model.get_layer("head"),
    }
    norms = {}
    variables = [v for layer in layers.values() for v in layer.trainable_weights]
    grads = dict(zip(map(id, variables), tape.gradient(loss, variables)))
    for path, layer in layers.items():
        squares = [np.sum(np.square(grads[id(v)])) for v in layer.trainable_weights]
        norms[path] = float(np.sqrt(np.sum(squares)))
    return norms


def test_norms_match_a_hand_computed_gradient(tmp_path):
    model = models.nested_model()
    model.compile("sgd", "mse")
    x, y = models.regression_data((models.SEQ, models.WIDTH), n=6)
    callback = GradientNormCallback(tmp_path, (x, y))
    callback.set_model(model)
    norms = callback.compute()
    expected = _manual_norms(model, x, y)
    assert set(norms) == set(expected) | {"global"}
    for path, value in expected.items():
        np.testing.assert_allclose(norms[path], value, rtol=1e-4, err_msg=path)
    np.testing.assert_allclose(
        norms["global"], np.sqrt(sum(v**2 for v in expected.values())), rtol=1e-4
    )


def test_fit_writes_one_scalar_series_per_trainable_layer(tmp_path):
    model = models.nested_model()
    model.compile("sgd", "mse")
    x, y = models.regression_data((models.SEQ, models.WIDTH), n=8)
    callback = GradientNormCallback(tmp_path, (x[:4], y[:4]), every_n_steps=2)
    model.fit(x, y, batch_size=2, epochs=2, callbacks=[callback], verbose=0)
    events, accumulator = models.read_events(tmp_path)
    expected = {
        f"{path}/grad_norm"
        for path in (
            "block_0/attention_norm",
            "block_0/mix",
            "block_0/ffn_norm",
            "final_norm",
            "head",
            "global",
        )
    }
    assert events["scalars"] == {tag: [2, 4, 6, 8] for tag in expected}
    last = accumulator.Tensors("head/grad_norm")[-1]
    np.testing.assert_allclose(
        float(tf.make_ndarray(last.tensor_proto)),
        _manual_norms(model, x[:4], y[:4])["head"],
        rtol=1e-4,
    )


def test_classifier_layers_inside_blocks_get_their_own_series(tmp_path):
    model = models.compile_classifier(models.classifier(num_layers=1))
    x, y = models.classifier_data(n=8)
    callback = GradientNormCallback(tmp_path, (x, y))
    callback.set_model(model)
    norms = callback.log(0)
    for path in (
        "encoder/block_0/attention_norm",
        "encoder/block_0/ffn_norm",
        "encoder/final_norm",
        "logits",
    ):
        assert norms[path] > 0, path
    # A multi-head attention layer's projections are separate layers.
    assert any(p.startswith("encoder/block_0/attention/") for p in norms)
    # Every trainable variable is counted once.
    squares = sum(v**2 for k, v in norms.items() if k != "global")
    np.testing.assert_allclose(norms["global"] ** 2, squares, rtol=1e-4)


def test_works_under_mirrored_strategy(tmp_path, two_device_strategy):
    with two_device_strategy.scope():
        model = models.nested_model()
        model.compile("sgd", "mse")
    x, y = models.regression_data((models.SEQ, models.WIDTH), n=8)
    callback = GradientNormCallback(tmp_path, (x[:4], y[:4]), every_n_steps=2)
    model.fit(x, y, batch_size=4, epochs=1, callbacks=[callback], verbose=0)
    events, _ = models.read_events(tmp_path)
    assert events["scalars"]["final_norm/grad_norm"] == [2]
    expected = _manual_norms(model, x[:4], y[:4])
    np.testing.assert_allclose(callback.compute()["head"], expected["head"], rtol=1e-4)


def test_sample_weights_and_loss_function_are_used(tmp_path):
    model = models.sequential_model()
    x, y = models.regression_data((models.WIDTH,), n=4)
    weights = np.array([1.0, 0.0, 0.0, 0.0], "float32")
    callback = GradientNormCallback(tmp_path, (x, y, weights), loss="mae")
    callback.set_model(model)
    with tf.GradientTape() as tape:
        per_sample = tf.reduce_mean(tf.abs(model(x) - y), axis=-1)
        loss = tf.reduce_mean(per_sample * weights)
    grads = tape.gradient(loss, model.get_layer("head").trainable_weights)
    expected = np.sqrt(sum(np.sum(np.square(g)) for g in grads))
    np.testing.assert_allclose(callback.compute()["head"], expected, rtol=1e-4)


def test_data_without_targets_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="must hold targets"):
        GradientNormCallback(tmp_path, np.zeros((2, 8), "float32"))


def test_an_unknown_loss_fails_at_construction(tmp_path):
    with pytest.raises(ValueError, match="Received: loss='no_such_loss'"):
        GradientNormCallback(
            tmp_path, (np.zeros((2, 8)), np.zeros((2, 1))), loss="no_such_loss"
        )


def test_a_model_without_a_single_loss_needs_loss(tmp_path):
    model = models.sequential_model()
    callback = GradientNormCallback(tmp_path, (np.zeros((2, 8)), np.zeros((2, 1))))
    callback.set_model(model)
    with pytest.raises(ValueError, match="pass `loss=`"):
        callback.compute()


def test_is_exported_from_tfnorm_callbacks():
    assert tfnorm.callbacks.GradientNormCallback is GradientNormCallback
    assert keras.callbacks.Callback in GradientNormCallback.__mro__

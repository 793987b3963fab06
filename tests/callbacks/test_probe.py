"""Finding norm layers by path, probing them, and leaving training alone."""

from __future__ import annotations

import numpy as np
import pytest

import tfnorm
from tests.callbacks import models
from tfnorm._keras import keras, tf
from tfnorm.callbacks import _probe


def _paths(model):
    return [path for path, _ in _probe.find_norm_layers(model)]


def test_finds_norms_inside_a_nested_functional_model():
    assert _paths(models.nested_model()) == [
        "block_0/attention_norm",
        "block_0/ffn_norm",
        "final_norm",
    ]


def test_finds_keras_layer_normalization_in_a_sequential_model():
    assert _paths(models.sequential_model()) == ["keras_norm"]


def test_finds_norms_held_in_a_list_by_a_subclassed_layer():
    assert _paths(models.composite_model()) == ["block/first_norm", "block/second_norm"]


def test_finds_every_norm_of_build_classifier_by_block():
    model = models.classifier(num_layers=2)
    assert _paths(model) == [
        "encoder/block_0/attention_norm",
        "encoder/block_0/ffn_norm",
        "encoder/block_1/attention_norm",
        "encoder/block_1/ffn_norm",
        "encoder/final_norm",
    ]


def test_probe_statistics_match_the_layer_output():
    model = models.nested_model()
    x, _ = models.regression_data((models.SEQ, models.WIDTH), n=6)
    final_norm = model.get_layer("final_norm")
    expected = keras.Model(model.input, final_norm.output)(x).numpy().astype("float64")
    probe = _probe.NormProbe(
        model, _probe.find_norm_layers(model), record=("outputs",), max_values=None
    )
    stats = probe.run(_probe.as_batches(x))["final_norm"]["outputs"]
    assert stats["count"] == expected.size
    np.testing.assert_allclose(stats["mean"], expected.mean(), atol=1e-6)
    np.testing.assert_allclose(stats["std"], expected.std(), rtol=1e-5)
    np.testing.assert_allclose(stats["min"], expected.min(), rtol=1e-6)
    np.testing.assert_allclose(stats["max"], expected.max(), rtol=1e-6)
    assert stats["nonfinite_fraction"] == 0.0
    np.testing.assert_allclose(
        np.sort(stats["values"]), np.sort(expected.ravel()), rtol=1e-6
    )


def test_probe_records_in_call_order_and_leaves_no_recorder_behind():
    model = models.nested_model()
    x, _ = models.regression_data((models.SEQ, models.WIDTH), n=2)
    entries = _probe.find_norm_layers(model)
    results = _probe.NormProbe(model, entries, record=("inputs", "outputs")).run(
        _probe.as_batches(x)
    )
    assert list(results) == ["block_0/attention_norm", "block_0/ffn_norm", "final_norm"]
    for _, layer in entries:
        assert "call" not in vars(layer)
    # The attention norm's input is the model input itself.
    np.testing.assert_allclose(
        results["block_0/attention_norm"]["inputs"]["mean"], x.mean(), rtol=1e-5
    )


def test_max_values_bounds_the_histogram_sample_not_the_statistics():
    model = models.sequential_model()
    x, _ = models.regression_data((models.WIDTH,), n=50)
    probe = _probe.NormProbe(
        model, _probe.find_norm_layers(model), record=("outputs",), max_values=64
    )
    stats = probe.run(_probe.as_batches(x))["keras_norm"]["outputs"]
    assert stats["count"] == 400
    assert 0 < len(stats["values"]) <= 64


def test_a_dataset_probe_uses_every_batch():
    model = models.sequential_model()
    x, y = models.regression_data((models.WIDTH,), n=10)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(4)
    batches = _probe.as_batches(dataset)
    assert len(batches) == 3
    probe = _probe.NormProbe(model, _probe.find_norm_layers(model), ("outputs",))
    assert probe.run(batches)["keras_norm"]["outputs"]["count"] == 10 * models.WIDTH


def test_probe_data_must_not_be_none():
    with pytest.raises(ValueError, match="Received: None"):
        _probe.as_batches(None)


def test_select_layers_by_path_name_or_object():
    model = models.nested_model()
    head = model.get_layer("head")
    selected = _probe.select_layers(model, ["block_0/mix", "final_norm", head])
    assert [path for path, _ in selected] == ["block_0/mix", "final_norm", "head"]
    with pytest.raises(ValueError, match="'nope'"):
        _probe.select_layers(model, ["nope"])
    with pytest.raises(ValueError, match="Received: layers='all'"):
        _probe.select_layers(model, "all")


def test_every_n_steps_must_be_a_positive_int():
    with pytest.raises(ValueError, match="Received: every_n_steps=0"):
        tfnorm.callbacks.NormHistogramCallback(
            "unused", np.zeros((1, 8)), every_n_steps=0
        )


def _train(seed, callbacks):
    keras.utils.set_random_seed(seed)
    model = models.nested_model(dropout_rate=0.5)
    model.compile(keras.optimizers.Adam(1e-2), "mse")
    x, y = models.regression_data((models.SEQ, models.WIDTH), n=32)
    model.fit(
        x, y, batch_size=8, epochs=2, shuffle=True, callbacks=callbacks, verbose=0
    )
    return model


def test_callbacks_change_neither_weights_nor_variables(tmp_path):
    x, y = models.regression_data((models.SEQ, models.WIDTH), n=8, seed=1)
    callbacks = [
        tfnorm.callbacks.NormHistogramCallback(
            tmp_path / "h", x, every_n_steps=1, record=("inputs", "outputs")
        ),
        tfnorm.callbacks.NormHealthMonitor(x, every_n_steps=1),
        tfnorm.callbacks.GradientNormCallback(tmp_path / "g", (x, y), every_n_steps=1),
    ]
    plain = _train(7, [])
    probed = _train(7, callbacks)
    assert callbacks[0]._writer._writer is not None  # the callbacks did run
    assert len(probed.variables) == len(plain.variables)
    assert len(probed.trainable_weights) == len(plain.trainable_weights)
    for a, b in zip(plain.weights, probed.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.name)
    # The comparison can fail: another seed gives other weights.
    other = _train(8, [])
    assert any(
        not np.array_equal(np.asarray(a), np.asarray(b))
        for a, b in zip(plain.trainable_weights, other.trainable_weights)
    )

"""The norm probe: statistics of norm layers' tensors, and probe data."""

from __future__ import annotations

import numpy as np
import pytest

import tfnorm
from tests.callbacks import models
from tfnorm._keras import keras, tf
from tfnorm.callbacks import find_norm_layers
from tfnorm.callbacks.probe import NormProbe, as_batches, check_probe_data


def test_probe_statistics_match_the_layer_output():
    model = models.nested_model()
    x, _ = models.regression_data((models.SEQ, models.WIDTH), n=6)
    final_norm = model.get_layer("final_norm")
    expected = keras.Model(model.input, final_norm.output)(x).numpy().astype("float64")
    probe = NormProbe(
        model, find_norm_layers(model), record=("outputs",), max_values=None
    )
    stats = probe.run(as_batches(x))["final_norm"]["outputs"]
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
    entries = find_norm_layers(model)
    results = NormProbe(model, entries, record=("inputs", "outputs")).run(as_batches(x))
    assert list(results) == ["block_0/attention_norm", "block_0/ffn_norm", "final_norm"]
    for _, layer in entries:
        assert "call" not in vars(layer)
    # The attention norm's input is the model input itself.
    np.testing.assert_allclose(
        results["block_0/attention_norm"]["inputs"]["mean"], x.mean(), rtol=1e-5
    )


def test_input_floor_is_each_layers_own_statistic_over_its_epsilon():
    inputs = keras.Input((models.WIDTH,))
    h = tfnorm.RMSNorm(partial=0.5, epsilon=1e-4, name="prms")(inputs)
    h = tfnorm.ScaleNorm(epsilon=1e-2, name="scale")(h)
    model = keras.Model(inputs, h)
    x, _ = models.regression_data((models.WIDTH,), n=5)
    results = NormProbe(
        model, find_norm_layers(model), record=("inputs",), input_floor=True
    ).run(as_batches(x))
    x64 = x.astype("float64")
    # pRMSNorm's statistic: the mean square of the first half of the features.
    np.testing.assert_allclose(
        results["prms"]["floor"], np.mean(x64[:, :4] ** 2, -1).min() / 1e-4, rtol=1e-5
    )
    scaled = np.asarray(model.get_layer("prms")(x), "float64")
    np.testing.assert_allclose(
        results["scale"]["floor"],
        np.sqrt(np.sum(scaled**2, -1)).min() / 1e-2,
        rtol=1e-5,
    )


def test_max_values_bounds_the_histogram_sample_not_the_statistics():
    model = models.sequential_model()
    x, _ = models.regression_data((models.WIDTH,), n=50)
    probe = NormProbe(
        model, find_norm_layers(model), record=("outputs",), max_values=64
    )
    stats = probe.run(as_batches(x))["keras_norm"]["outputs"]
    assert stats["count"] == 400
    assert 0 < len(stats["values"]) <= 64


def test_a_dataset_probe_uses_every_batch():
    model = models.sequential_model()
    x, y = models.regression_data((models.WIDTH,), n=10)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(4)
    batches = as_batches(dataset)
    assert len(batches) == 3
    probe = NormProbe(model, find_norm_layers(model), ("outputs",))
    assert probe.run(batches)["keras_norm"]["outputs"]["count"] == 10 * models.WIDTH


def test_probe_data_must_not_be_none():
    with pytest.raises(ValueError, match="Received: None"):
        as_batches(None)


def test_an_infinite_dataset_is_rejected_instead_of_read_forever():
    dataset = tf.data.Dataset.from_tensor_slices(np.zeros((4, 8), "float32")).repeat()
    with pytest.raises(ValueError, match=r"infinite dataset.*Received: data="):
        as_batches(dataset)


def test_probe_data_that_is_not_an_array_names_the_argument():
    with pytest.raises(ValueError, match=r"tensors or arrays.*Received: data="):
        as_batches([object()])


def test_data_the_model_cannot_take_names_the_argument_and_shapes():
    model = models.sequential_model()
    batches = as_batches(np.zeros((2, models.WIDTH + 3), "float32"))
    probe = NormProbe(model, find_norm_layers(model), ("outputs",))
    with pytest.raises(
        ValueError, match=r"`data` cannot be fed to model 'seq'.*data=float32\[2, 11\]"
    ):
        check_probe_data(model, lambda: probe.run(batches), batches)


@pytest.mark.parametrize(
    "data",
    [
        np.zeros((0, 8), "float32"),
        (np.zeros((0, 8), "float32"), np.zeros((0,), "int32")),
        tf.data.Dataset.from_tensor_slices(np.zeros((4, 8), "float32"))
        .batch(2)
        .take(0)
        .concatenate(tf.data.Dataset.from_tensors(np.zeros((0, 8), "float32"))),
    ],
    ids=["array", "tuple", "dataset"],
)
def test_an_empty_probe_batch_is_refused_naming_the_argument(data):
    # It ran, and recorded statistics of nothing (NaN) at every step.
    with pytest.raises(
        ValueError, match=r"`data` holds an empty batch \(0 examples\).*float32\[0, 8\]"
    ):
        as_batches(data)

"""Finding layers by path, and reading each norm layer's row statistic."""

from __future__ import annotations

import numpy as np
import pytest

import tfnorm
from tests.callbacks import models
from tfnorm._keras import keras, keras_rms_normalization
from tfnorm.callbacks import find_norm_layers, walk_layers
from tfnorm.callbacks.layers import (
    find_weighted_layers,
    norm_statistic,
    select_layers,
)


def _paths(model):
    return [path for path, _ in find_norm_layers(model)]


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


def test_walk_layers_yields_every_layer_depth_first_by_path():
    paths = [
        path
        for path, layer in walk_layers(models.nested_model())
        if not isinstance(layer, keras.layers.InputLayer)  # names vary by Keras
    ]
    assert paths == [
        "block_0",
        "block_0/attention_norm",
        "block_0/mix",
        "block_0/ffn_norm",
        "final_norm",
        "global_average_pooling1d",
        "head",
    ]


def test_walk_layers_yields_a_shared_layer_once():
    inputs = keras.Input((models.WIDTH,))
    shared = keras.layers.Dense(models.WIDTH, name="shared")
    model = keras.Model(inputs, shared(shared(inputs)))
    assert [layer for _, layer in walk_layers(model)].count(shared) == 1


def test_select_layers_by_path_name_or_object():
    model = models.nested_model()
    head = model.get_layer("head")
    selected = select_layers(model, ["block_0/mix", "final_norm", head])
    assert [path for path, _ in selected] == ["block_0/mix", "final_norm", "head"]
    with pytest.raises(ValueError, match="'nope'"):
        select_layers(model, ["nope"])
    with pytest.raises(ValueError, match="Received: layers='all'"):
        select_layers(model, "all")


def test_weighted_layers_own_each_variable_once():
    model = models.composite_model()
    entries = find_weighted_layers(model)
    owned = [id(v) for _, _, variables in entries for v in variables]
    assert sorted(owned) == sorted(id(v) for v in model.trainable_weights)
    assert [path for path, _, _ in entries] == [
        "block/first_norm",
        "block/second_norm",
        "block/inner",
        "head",
    ]


def _rows(shape=(3, 5, 8), seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 2.0 + 0.5).astype("float32")


@pytest.mark.parametrize(
    "layer, name, expected",
    [
        (tfnorm.LayerNormalization(), "variance", lambda x: x.var(-1)),
        (tfnorm.RMSNorm(), "mean_square", lambda x: np.mean(x**2, -1)),
        (
            tfnorm.ScaleNorm(),
            "norm",
            lambda x: np.sqrt(np.sum(x.astype("float64") ** 2, -1)),
        ),
        (keras.layers.LayerNormalization(), "variance", lambda x: x.var(-1)),
    ],
    ids=["tfnorm_ln", "tfnorm_rms", "tfnorm_scale", "keras_ln"],
)
def test_norm_statistic_of_each_norm_layer(layer, name, expected):
    x = _rows()
    source = norm_statistic(layer)
    assert source.row_statistic_name == name
    np.testing.assert_allclose(
        np.asarray(source.row_statistic(x)), expected(x.astype("float64")), rtol=1e-5
    )


@pytest.mark.skipif(
    keras_rms_normalization() is None,
    reason="keras.layers.RMSNormalization exists only from Keras 3.9",
)
def test_keras_rms_normalization_is_read_as_a_mean_square():
    x = _rows()
    layer = keras_rms_normalization()(axis=[-2, -1])
    source = norm_statistic(layer)
    assert source.row_statistic_name == "mean_square"
    np.testing.assert_allclose(
        np.asarray(source.row_statistic(x)), np.mean(x**2, axis=(-2, -1)), rtol=1e-5
    )


def test_keras_norm_with_an_axis_list_after_build_is_read_over_those_axes():
    x = _rows()
    layer = keras.layers.LayerNormalization(axis=[1, 2])
    layer(x)  # Keras rewrites `axis` after build
    np.testing.assert_allclose(
        np.asarray(norm_statistic(layer).row_statistic(x)),
        x.astype("float64").var(axis=(1, 2)),
        rtol=1e-5,
    )


def test_finds_norms_held_as_attributes_of_keras_io_style_blocks():
    from tests.models import user_models

    model = user_models.translator()
    paths = _paths(model)
    assert [p.split("/")[0] for p in paths] == ["encoder"] * 2 + ["decoder"] * 3
    # The probe captures the outputs of nested norms too.
    from tfnorm.callbacks.probe import NormProbe, as_batches

    x = user_models.token_batch()
    results = NormProbe(model, find_norm_layers(model), record=("outputs",)).run(
        as_batches(([x, x],))
    )
    assert list(results) == paths
    assert all(r["outputs"]["count"] > 0 for r in results.values())


def test_finds_keras_hub_rms_norms_by_class():
    if not tfnorm._keras.IS_KERAS_3:
        pytest.skip("keras-hub needs Keras 3 (this runtime is Keras 2)")
    keras_hub = pytest.importorskip("keras_hub", reason="keras_hub is not importable")
    backbone = keras_hub.models.LlamaBackbone(
        vocabulary_size=20,
        num_layers=1,
        num_query_heads=2,
        num_key_value_heads=1,
        hidden_dim=8,
        intermediate_dim=16,
    )
    found = find_norm_layers(backbone)
    assert [p for p, _ in found] == [
        "transformer_layer_0/self_attention_layernorm",
        "transformer_layer_0/feedforward_layernorm",
        "sequence_output_layernorm",
    ]
    x = _rows((2, 4, 8))
    source = norm_statistic(found[0][1])
    assert source.row_statistic_name == "mean_square"
    np.testing.assert_allclose(
        np.asarray(source.row_statistic(x)), np.mean(x**2, -1), rtol=1e-5
    )

"""Behaviour every tfnorm norm shares (axis, dtype and epsilon handling,
dynamic shapes, masking), run once per layer class."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import tfnorm
from tests.testing import random_input
from tfnorm._keras import get_keras_mask, keras, tf

NORMS = [tfnorm.LayerNormalization, tfnorm.RMSNorm, tfnorm.ScaleNorm]
norm_classes = pytest.mark.parametrize("cls", NORMS, ids=lambda c: c.__name__)


@norm_classes
@pytest.mark.parametrize("axis", [3, -4, [1, 3], [0, 2, -3]])
def test_axis_out_of_range_names_the_argument(cls, axis):
    with pytest.raises(ValueError, match=r"axis.*Received: axis="):
        cls(axis=axis).build((2, 3, 4))


@norm_classes
@pytest.mark.parametrize("axis", [[1, 1], [-1, 2]])
def test_duplicate_axes_are_rejected(cls, axis):
    with pytest.raises(ValueError, match="same dimension twice"):
        cls(axis=axis).build((2, 3, 4))


@norm_classes
@pytest.mark.parametrize("axis", ["last", 1.0, [1, "2"], [], True, None])
def test_axis_of_wrong_type_is_rejected(cls, axis):
    with pytest.raises(TypeError, match=r"`axis` must be an int"):
        cls(axis=axis)


@norm_classes
@pytest.mark.parametrize("axis", [np.int64(-1), [np.int32(1), np.int64(2)]])
def test_numpy_integer_axes_are_stored_as_python_ints(cls, axis):
    # A NumPy scalar in get_config() would not survive JSON serialisation.
    stored = cls(axis=axis).get_config()["axis"]
    assert stored == ([1, 2] if isinstance(axis, list) else -1)
    values = stored if isinstance(stored, list) else [stored]
    assert all(type(a) is int for a in values), [type(a) for a in values]
    json.dumps(stored)


@norm_classes
def test_unknown_size_along_a_normalised_axis_is_rejected(cls):
    with pytest.raises(ValueError, match=r"axis 1 .* is None"):
        cls(axis=[1, 2]).build((None, None, 4))


@norm_classes
@pytest.mark.parametrize("epsilon", [0.0, -1e-5, math.inf, math.nan, "small", None])
def test_bad_epsilon_is_rejected(cls, epsilon):
    with pytest.raises(ValueError, match="epsilon"):
        cls(epsilon=epsilon)


@norm_classes
@pytest.mark.parametrize("dtype", ["int32", "bool"])
def test_non_float_input_names_the_dtype(cls, dtype):
    layer = cls()
    x = tf.zeros((2, 4), dtype)
    with pytest.raises(TypeError, match=f"inputs.dtype={dtype}"):
        layer(x)


@norm_classes
def test_zero_size_batch(cls):
    layer = cls()
    x = tf.zeros((0, 3, 8))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
        loss = tf.reduce_sum(y)
    assert tuple(y.shape) == (0, 3, 8)
    grads = tape.gradient(loss, layer.trainable_weights)
    for g in grads:
        np.testing.assert_array_equal(np.asarray(g), np.zeros(g.shape))


@norm_classes
@pytest.mark.parametrize("jit_compile", [False, True])
def test_unknown_batch_and_sequence_length(cls, jit_compile):
    layer = cls()
    fn = tf.function(
        layer, input_signature=[tf.TensorSpec((None, None, 8))], jit_compile=jit_compile
    )
    for length in (3, 5):
        x = random_input((2, length, 8))
        np.testing.assert_allclose(np.asarray(fn(x)), np.asarray(layer(x)), atol=1e-5)


@norm_classes
def test_saved_config_is_not_tied_to_input_rank(cls):
    layer = cls(axis=-1)
    layer(random_input((2, 3, 8)))
    config = layer.get_config()
    assert config["axis"] == -1
    reloaded = cls.from_config(config)
    assert tuple(reloaded(random_input((4, 8))).shape) == (4, 8)
    assert tuple(
        reloaded.__class__.from_config(config)(random_input((1, 2, 3, 8))).shape
    ) == (
        1,
        2,
        3,
        8,
    )


@norm_classes
def test_keras_mask_passes_through_to_the_next_layer(cls):
    tokens = keras.Input(shape=(None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 8, mask_zero=True)(tokens)
    normed = cls()(embedded)
    pooled = keras.layers.GlobalAveragePooling1D()(normed)  # honours the mask
    model = keras.Model(tokens, pooled)
    ids = np.array([[3, 4, 0, 0], [5, 0, 0, 0]])
    out = np.asarray(model(ids))
    # Embedding rows of padding tokens differ from zero: if the mask were
    # dropped, pooling would average them in. Compare with the real-token mean.
    embedding = model.layers[1]
    norm_layer = model.layers[2]
    real = np.asarray(norm_layer(embedding(ids[:1, :2])))
    np.testing.assert_allclose(out[0], real[0].mean(axis=0), atol=1e-5)
    mask = embedding.compute_mask(ids)
    np.testing.assert_array_equal(
        np.asarray(norm_layer.compute_mask(None, mask)), np.asarray(mask)
    )
    eager_out = norm_layer(embedding(ids))
    np.testing.assert_array_equal(
        np.asarray(get_keras_mask(eager_out)), np.asarray(mask)
    )

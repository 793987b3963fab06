"""Behaviour every tfnorm norm shares (axis, dtype and epsilon handling,
dynamic shapes, masking), run once per layer class."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import tfnorm
from tests.testing import random_input, randomize_weights
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


@norm_classes
def test_negative_axis_resolves_against_each_call_rank(cls):
    # Built on rank 2, called on rank 3: `axis=-1` is still the last dim.
    layer = cls()
    layer.build((None, 8))
    randomize_weights(layer)
    x = random_input((2, 5, 8), seed=11, offset=1.0, spread=2.0)
    rows = np.asarray(layer(x.reshape(10, 8))).reshape(2, 5, 8)
    np.testing.assert_allclose(np.asarray(layer(x)), rows, rtol=1e-6, atol=1e-6)


@norm_classes
def test_one_layer_shared_by_inputs_of_different_rank(cls):
    layer = cls(axis=[-1])
    sequence = keras.Input(shape=(5, 8))
    vector = keras.Input(shape=(8,))
    model = keras.Model([sequence, vector], [layer(sequence), layer(vector)])
    x = random_input((2, 5, 8), seed=12, offset=1.0)
    out_sequence, out_vector = model([x, x[:, 0]])
    np.testing.assert_allclose(
        np.asarray(out_sequence)[:, 0], np.asarray(out_vector), rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize("cls", [tfnorm.LayerNormalization, tfnorm.RMSNorm])
def test_input_the_weights_cannot_serve_is_rejected(cls):
    layer = cls(axis=1)
    layer.build((None, 8))
    with pytest.raises(ValueError, match=r"size 8 along axis 1.*Received: axis=1"):
        layer(random_input((2, 5, 8)))


@pytest.mark.parametrize("cls", [tfnorm.LayerNormalization, tfnorm.RMSNorm])
def test_rank_where_the_axes_swap_order_is_rejected(cls):
    # axis=[1, -2]: dims (1, 2) at rank 4, but (1, 0) at rank 2 -- same sizes,
    # other order, so the weights would be read transposed.
    layer = cls(axis=[1, -2])
    layer.build((2, 3, 4, 5))
    with pytest.raises(ValueError, match=r"cannot serve an input of rank 2"):
        layer(random_input((4, 3)))


def test_scale_norm_serves_any_size():
    # One scalar g: nothing ties it to the number of features.
    layer = tfnorm.ScaleNorm(scale_initializer="ones")
    layer.build((None, 8))
    x = random_input((3, 5), seed=13)
    expected = x / np.linalg.norm(x, axis=-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(layer(x)), expected, rtol=1e-5)


@norm_classes
@pytest.mark.parametrize("axis", [99, -3, [1, 2], [0, 0]])
def test_compute_output_shape_rejects_a_bad_axis(cls, axis):
    with pytest.raises(ValueError, match=r"Received: axis="):
        cls(axis=axis).compute_output_shape((2, 4))


@norm_classes
def test_compute_output_shape_returns_the_input_shape(cls):
    assert tuple(cls(axis=[0, -1]).compute_output_shape((2, 4))) == (2, 4)


@norm_classes
def test_messages_and_config_show_axis_as_a_plain_list(cls):
    # Keras 2 wraps list attributes in a tracking ListWrapper.
    layer = cls(axis=[1, 2])
    layer.build((2, 3, 4))
    assert type(layer.get_config()["axis"]) is list
    with pytest.raises(ValueError) as error:
        layer(random_input((2, 3)))
    assert "ListWrapper" not in str(error.value)
    assert "axis=[1, 2]" in str(error.value)


@norm_classes
def test_ragged_input_is_normalised_row_by_row(cls):
    rows = [random_input((2, 3), seed=14), random_input((1, 3), seed=15)]
    x = tf.ragged.constant([r.tolist() for r in rows], ragged_rank=1)
    layer = cls()
    y = layer(x)
    assert isinstance(y, tf.RaggedTensor)
    for row, out in zip(rows, y):
        np.testing.assert_allclose(
            np.asarray(out), np.asarray(layer(row)), rtol=1e-6, atol=1e-6
        )
    # A ragged dim has no fixed size to normalise over.
    with pytest.raises(ValueError, match=r"axis 1 of input shape .* is None"):
        cls(axis=[1, 2])(x)

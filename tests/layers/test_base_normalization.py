"""Behaviour every tfnorm norm shares (axis, dtype and epsilon handling,
dynamic shapes, masking), run once per layer class."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import tfnorm
from tests.layers.norm_family import EPSILON_NORMS, FAMILY, NORMS, named_weights
from tests.testing import random_input, randomize_weights
from tfnorm._keras import get_keras_mask, keras, tf

norm_classes = pytest.mark.parametrize("cls", NORMS, ids=lambda c: c.__name__)
epsilon_norm_classes = pytest.mark.parametrize(
    "cls", EPSILON_NORMS, ids=lambda c: c.__name__
)


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
def test_axis_errors_match_the_wording_keras_own_tests_expect(cls):
    # The regular expressions of Keras 3's and tf_keras's LayerNormalization
    # tests (test_invalid_axis, testInvalidAxis, testDuplicateAxis).
    with pytest.raises(
        TypeError,
        match=r"Expected an int or a list/tuple of ints for the argument 'axis'",
    ):
        cls(axis={"axis": -1})
    with pytest.raises(
        ValueError,
        match=r"Invalid value for `axis` argument. Expected 0 <= axis < inputs.rank",
    ):
        cls(axis=3).build((2, 2, 2))
    with pytest.raises(ValueError, match=r"Duplicate axis:"):
        cls(axis=[-1, -1]).build((2, 2, 2))


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


@epsilon_norm_classes
@pytest.mark.parametrize("epsilon", [0.0, -1e-5, math.inf, math.nan, "small", None])
def test_bad_epsilon_is_rejected(cls, epsilon):
    with pytest.raises(ValueError, match="epsilon"):
        cls(epsilon=epsilon)


_FLOAT32 = np.finfo(np.float32)
# Each class's accepted epsilons: those its float32 statistics hold as
# normal numbers (ScaleNorm compares the squared norm with epsilon**2).
EPSILON_RANGES = {
    tfnorm.LayerNormalization: (float(_FLOAT32.tiny), float(_FLOAT32.max)),
    tfnorm.RMSNorm: (float(_FLOAT32.tiny), float(_FLOAT32.max)),
    tfnorm.ScaleNorm: (
        math.sqrt(float(_FLOAT32.tiny)),
        math.sqrt(float(_FLOAT32.max)),
    ),
}


@epsilon_norm_classes
@pytest.mark.parametrize("where", ["below", "subnormal", "above"])
def test_epsilon_float32_cannot_hold_is_rejected_with_the_range(cls, where):
    low, high = EPSILON_RANGES[cls]
    # 1e-46 is 0 in float32 and 1e39 is inf; just outside a class's range,
    # its statistics would be subnormal (flushed to 0 on CPU) or inf.
    epsilon = {"below": 1e-46, "subnormal": low * 0.5, "above": high * 2.0}[where]
    with pytest.raises(
        ValueError, match=r"`epsilon` must be a number in about \["
    ) as error:
        cls(epsilon=epsilon)
    assert f"Received: epsilon={epsilon!r}" in str(error.value)
    assert f"{low:.3g}" in str(error.value) and f"{high:.3g}" in str(error.value)


def _reference_output(layer, x):
    weights = {k: np.asarray(w, "float64") for k, w in named_weights(layer).items()}
    return FAMILY[type(layer)].numpy(layer, x, weights)


@epsilon_norm_classes
@pytest.mark.parametrize("end", [0, 1], ids=["smallest", "largest"])
def test_epsilon_at_either_end_of_its_range_gives_correct_outputs(cls, end):
    epsilon = EPSILON_RANGES[cls][end]
    # An all-zero row (padding), a constant row and an ordinary one.
    x = np.array([[0.0] * 4, [5.0] * 4, [1.0, -2.0, 3.0, 4.0]], "float32")
    layer = cls(epsilon=epsilon)
    y = np.asarray(layer(x), "float64")
    expected = _reference_output(layer, x.astype("float64"))
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=0)


@epsilon_norm_classes
def test_keras_test_suite_epsilons_are_accepted(cls):
    # Keras's own layer tests use these; Keras itself checks no range.
    for epsilon in (1e-12, 1e-6, 1e-3, 1, np.float32(1e-5)):
        assert cls(epsilon=epsilon).epsilon == float(epsilon)


_STATISTICS = {
    tfnorm.LayerNormalization: ("variance", lambda x, axes: x.var(axis=axes)),
    tfnorm.RMSNorm: ("mean_square", lambda x, axes: np.mean(x**2, axis=axes)),
    tfnorm.ScaleNorm: ("norm", lambda x, axes: np.sqrt(np.sum(x**2, axis=axes))),
}


@epsilon_norm_classes
@pytest.mark.parametrize("axis", [-1, [1, 3], [-1, -3]])
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_row_statistic_matches_its_definition(cls, axis, dtype):
    x = random_input((2, 3, 4, 5), offset=0.5, spread=2.0).astype(dtype)
    layer = cls(axis=axis)
    name, definition = _STATISTICS[cls]
    axes = tuple(layer.reduction_axes(4))
    assert axes == tuple(
        sorted(a % 4 for a in ([axis] if isinstance(axis, int) else axis))
    )
    statistic = layer.row_statistic(x)
    assert layer.row_statistic_name == name
    assert statistic.dtype == ("float64" if dtype == "float64" else "float32")
    expected = definition(x.astype("float64"), axes)
    np.testing.assert_allclose(np.asarray(statistic), expected, rtol=1e-5)


@epsilon_norm_classes
def test_row_statistic_is_what_the_formula_compares_with_epsilon(cls):
    # Each output written with the layer's own statistic (weights at their
    # start, gamma = 1, beta = 0, ScaleNorm's g = sqrt(d)).
    epsilon = 0.5  # large enough to matter in every formula
    x = random_input((6, 8), spread=0.7)
    layer = cls(epsilon=epsilon)
    statistic = np.asarray(layer.row_statistic(x), "float64")[:, None]
    x64 = x.astype("float64")
    if cls is tfnorm.LayerNormalization:
        expected = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(statistic + epsilon)
    elif cls is tfnorm.RMSNorm:
        expected = x64 / np.sqrt(statistic + epsilon)
    else:
        expected = math.sqrt(8) * x64 / np.maximum(statistic, epsilon)
    np.testing.assert_allclose(np.asarray(layer(x), "float64"), expected, rtol=1e-5)


def test_a_norm_without_a_statistic_takes_no_epsilon():
    with pytest.raises(ValueError, match="takes no `epsilon`. Received: epsilon=1e-05"):
        tfnorm.DynamicTanh(epsilon=1e-5)
    layer = tfnorm.DynamicTanh()
    assert layer.row_statistic(random_input((2, 4))) is None
    assert "epsilon" not in layer.get_config()
    assert tfnorm.DynamicTanh.from_config(layer.get_config()).epsilon is None


def test_partial_rms_norm_statistic_uses_the_leading_features():
    x = random_input((3, 10), spread=2.0)
    layer = tfnorm.RMSNorm(partial=0.25)  # ceil(2.5) = 3 features
    np.testing.assert_allclose(
        np.asarray(layer.row_statistic(x)),
        np.mean(x[:, :3].astype("float64") ** 2, -1),
        rtol=1e-5,
    )


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

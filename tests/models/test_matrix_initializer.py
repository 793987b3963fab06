from __future__ import annotations

import re

import numpy as np
import pytest

from tfnorm._keras import keras, tf
from tfnorm.models import MatrixInitializer


class _Counting(keras.initializers.Initializer):
    """0, 1, 2, ... in row-major order; remembers the shapes it was asked for."""

    def __init__(self):
        self.shapes = []

    def __call__(self, shape, dtype=None, **kwargs):
        self.shapes.append(tuple(shape))
        return tf.reshape(tf.range(np.prod(shape), dtype=tf.float32), shape)


def test_draws_the_matrix_then_reshapes_it():
    inner = _Counting()
    kernel = np.asarray(MatrixInitializer(inner, (32, 32))((32, 4, 8)))
    assert inner.shapes == [(32, 32)]
    np.testing.assert_array_equal(kernel, np.arange(1024.0).reshape(32, 4, 8))


def test_orthogonal_matrix_stays_orthogonal_after_reshape():
    kernel = np.asarray(MatrixInitializer("orthogonal", (32, 32))((4, 8, 32)))
    matrix = kernel.reshape(32, 32)
    np.testing.assert_allclose(matrix.T @ matrix, np.eye(32), atol=1e-5)


def test_glorot_fans_come_from_the_matrix_shape():
    kernel = np.asarray(MatrixInitializer("glorot_uniform", (256, 256))((256, 8, 32)))
    # fan_in = fan_out = 256: limit sqrt(6 / 512), std limit / sqrt(3).
    limit = (6.0 / 512) ** 0.5
    assert np.abs(kernel).max() <= limit
    assert np.std(kernel) == pytest.approx(limit / 3**0.5, rel=0.02)


def test_serialises_with_its_registered_name():
    initializer = MatrixInitializer({"class_name": "HeNormal", "config": {}}, (8, 16))
    config = keras.initializers.serialize(initializer)
    revived = keras.initializers.deserialize(config)
    assert isinstance(revived, MatrixInitializer)
    assert revived.matrix_shape == (8, 16)
    assert isinstance(revived.initializer, keras.initializers.HeNormal)
    assert revived.get_config() == initializer.get_config()
    clone = MatrixInitializer.from_config(initializer.get_config())
    assert np.asarray(clone((8, 2, 8))).shape == (8, 2, 8)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: MatrixInitializer("glorot_uniform", (8, 0)), "matrix_shape=(8, 0)"),
        (lambda: MatrixInitializer("glorot_uniform", 8), "matrix_shape=8"),
        (lambda: MatrixInitializer(None, (8, 8)), "initializer=None"),
        (
            lambda: MatrixInitializer("glorot_uniform", (8, 8))((8, 3, 3)),
            "shape=(8, 3, 3)",
        ),
    ],
)
def test_bad_arguments_raise_clear_errors(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()

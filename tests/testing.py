"""The generic Keras-layer contract, checked once per layer variant.

Each layer test file calls `run_layer_test` for its variants and then tests
only what is specific to that layer (its formula, its options).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import run_python
from tfnorm import _keras
from tfnorm._keras import keras, tf

#: Largest absolute error accepted against a float64 reference, by input dtype.
#: Half types: one rounding step of the dtype (its machine epsilon), relative.
TOLERANCE = {
    "float64": 1e-10,
    "float32": 1e-5,
    "float16": 2.0**-10,
    "bfloat16": 2.0**-7,
}


def assert_close(actual, expected, dtype="float32", scale=1.0):
    actual = np.asarray(tf.cast(actual, tf.float64))
    expected = np.asarray(expected, np.float64)
    tol = TOLERANCE[dtype]
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol * scale)


def random_input(shape, seed=0, dtype="float32", offset=0.0, spread=1.0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * spread + offset).astype(dtype)


def randomize_weights(layer, seed=1):
    """Non-trivial weights (γ around 1, β around 0) so γ/β bugs show."""
    rng = np.random.default_rng(seed)
    values = []
    for variable, value in zip(layer.weights, layer.get_weights()):
        is_scale = "gamma" in variable.name or "scale" in variable.name
        noise = 0.5 * rng.standard_normal(value.shape)
        values.append(((1.0 if is_scale else 0.0) + noise).astype(value.dtype))
    layer.set_weights(values)


def run_layer_test(
    cls,
    init_kwargs,
    input_shape,
    expected_num_trainable_weights,
    reference=None,
    check_reload=True,
):
    """Checks build, call, config round trip, masking, tf.function/XLA,
    mixed precision and save/reload in a fresh process.

    `reference(x, weights)` (float64 NumPy) gives the expected output.
    """
    x = random_input(input_shape, offset=0.5, spread=2.0)
    layer = cls(**init_kwargs)
    y = layer(x)
    assert tuple(y.shape) == tuple(input_shape)
    assert len(layer.trainable_weights) == expected_num_trainable_weights
    assert len(layer.non_trainable_weights) == 0
    assert tuple(layer.compute_output_shape(input_shape)) == tuple(input_shape)
    randomize_weights(layer)
    y = np.asarray(layer(x))
    if reference is not None:
        weights = [np.asarray(w, np.float64) for w in layer.get_weights()]
        assert_close(y, reference(x.astype(np.float64), weights))

    # Config round trip: same config, same outputs with the same weights.
    config = layer.get_config()
    clone = cls.from_config(config)
    assert clone.get_config() == config
    clone.build(input_shape)
    clone.set_weights(layer.get_weights())
    np.testing.assert_array_equal(np.asarray(clone(x)), y)

    # Masks pass through unchanged.
    mask = np.ones(input_shape[:2], bool)
    mask[:, -1] = False
    assert layer.supports_masking
    np.testing.assert_array_equal(np.asarray(layer.compute_mask(x, mask)), mask)

    # Graph mode and XLA give the eager result.
    graph = tf.function(lambda t: layer(t))
    xla = tf.function(lambda t: layer(t), jit_compile=True)
    np.testing.assert_allclose(np.asarray(graph(x)), y, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(xla(x)), y, rtol=1e-5, atol=1e-5)

    # Mixed precision: float32 weights, output in the compute dtype.
    for policy, compute in (
        ("mixed_float16", tf.float16),
        ("mixed_bfloat16", tf.bfloat16),
    ):
        mixed = cls(**init_kwargs, dtype=policy)
        out = mixed(x)
        assert out.dtype == compute
        assert all(w.dtype == tf.float32 for w in mixed.weights)
        mixed.set_weights(layer.get_weights())
        half = "float16" if compute == tf.float16 else "bfloat16"
        # Against the float32 result, within the half type's resolution
        # (input rounding included, hence a few steps).
        np.testing.assert_allclose(
            np.asarray(tf.cast(mixed(x), tf.float32)),
            y,
            rtol=8 * TOLERANCE[half],
            atol=8 * TOLERANCE[half] * max(1.0, float(np.abs(y).max())),
        )

    if check_reload:
        assert_reloads_in_fresh_process(layer, input_shape, x)


def assert_reloads_in_fresh_process(layer, input_shape, x):
    """Saves a model around `layer` in every format of this runtime and
    reloads it in a new process that only imports tfnorm."""
    inputs = keras.Input(shape=input_shape[1:])
    model = keras.Model(inputs, layer(inputs))
    assert_model_reloads_in_fresh_process(
        model,
        {"x": x, "expected": np.asarray(model(x))},
        """
        layer = model.layers[-1]
        assert type(layer).__module__.startswith("tfnorm."), type(layer)
        np.testing.assert_array_equal(np.asarray(model(x)), expected)
        """,
    )


def assert_model_reloads_in_fresh_process(model, arrays, checks):
    """Saves `model` in every format of this runtime, and `arrays` (NumPy
    arrays by name) beside it; then, in a new process that only imports
    tfnorm (and NumPy as `np`, TensorFlow as `tf`), loads the arrays under
    their names and each saved model as `model`, and runs `checks` (Python
    statements) on it."""
    import os
    import tempfile
    import textwrap

    workdir = tempfile.mkdtemp(prefix="tfnorm-reload-")
    lines = ["import numpy as np, tensorflow as tf", "import tfnorm"]
    for name, array in arrays.items():
        path = os.path.join(workdir, f"{name}.npy")
        np.save(path, array)
        lines.append(f"{name} = np.load({path!r})")
    paths = [
        _keras.save_model(model, os.path.join(workdir, "model"), fmt)
        for fmt in _keras.SAVE_FORMATS
    ]
    lines += [
        f"for path in {paths!r}:",
        "    model = tf.keras.models.load_model(path, compile=False)",
        textwrap.indent(textwrap.dedent(checks).strip(), " " * 4),
        '    print("reloaded", path)',
    ]
    out = run_python("\n".join(lines))
    assert out.count("reloaded") == len(paths), out


def import_keras_hub():
    """keras_hub, or a skip: it needs Keras 3 and is installed in the keras3
    runtime only."""
    if not _keras.IS_KERAS_3:
        pytest.skip("keras-hub needs Keras 3 (this runtime is Keras 2)")
    return pytest.importorskip("keras_hub", reason="keras_hub is not importable")

from __future__ import annotations

import json

import numpy as np
import pytest

import tfnorm
from tests.conftest import run_python
from tests.layers import reference
from tests.testing import assert_close, random_input, randomize_weights
from tfnorm import _keras
from tfnorm._keras import keras, tf
from tfnorm.layers import _ops

GRID_SHAPES_AXES = [
    ((7, 16), -1),
    ((2, 5, 16), -1),
    ((2, 5, 16), [1, 2]),
    ((2, 3, 4, 6), [-1, -3]),
    ((2, 3, 4, 6), [2, 1]),
    ((2, 3, 2, 4, 5), [1, 4]),
]


@pytest.mark.parametrize("epsilon", [1e-12, 1e-5, 1e-3])
@pytest.mark.parametrize("shape, axis", GRID_SHAPES_AXES)
def test_matches_float64_reference(shape, axis, epsilon):
    layer = tfnorm.LayerNormalization(axis=axis, epsilon=epsilon)
    x = random_input(shape, seed=3, offset=1.5, spread=3.0)
    layer.build(shape)
    randomize_weights(layer)
    gamma, beta = (np.asarray(w, np.float64) for w in layer.get_weights())
    expected = reference.layer_norm(x.astype(np.float64), gamma, beta, axis, epsilon)
    assert_close(layer(x), expected)


@pytest.mark.parametrize("epsilon", [1e-5, 1e-3])
@pytest.mark.parametrize(
    "axis, shape",
    [
        (-1, (3, 4, 6)),
        ([1, 2], (3, 4, 6)),
        ([-1, -2], (3, 4, 6)),
        ([2, 1], (3, 4, 6)),
        ([1, -1], (3, 4, 6)),
        ([-1, 1], (3, 4, 6)),
        ([-1, 0, 2], (2, 3, 4, 5)),
        ([3, 3 - 4 + 1], (2, 3, 4, 4)),  # square weights: a misread shows
    ],
)
def test_same_outputs_and_weights_as_keras_builtin(axis, shape, epsilon):
    x = random_input(shape, seed=4, offset=2.0)
    ours = tfnorm.LayerNormalization(axis=axis, epsilon=epsilon)
    theirs = keras.layers.LayerNormalization(axis=axis, epsilon=epsilon)
    ours.build(x.shape)
    theirs.build(x.shape)
    assert [tuple(w.shape) for w in ours.weights] == [
        tuple(w.shape) for w in theirs.weights
    ]
    randomize_weights(theirs)
    ours.set_weights(theirs.get_weights())
    np.testing.assert_allclose(np.asarray(ours(x)), np.asarray(theirs(x)), atol=1e-5)
    # And back: our weights load into Keras's layer unchanged.
    randomize_weights(ours, seed=7)
    theirs.set_weights(ours.get_weights())
    np.testing.assert_allclose(np.asarray(ours(x)), np.asarray(theirs(x)), atol=1e-5)


def test_large_inputs_stay_accurate():
    # Inputs around 1e4 with unit spread. A float32 mean of such values is
    # off by ~1e-3 (the float32 spacing at 1e4), and forms that compute
    # x * inv + (beta - mean * inv) round x * inv at that magnitude too: both
    # give errors around 1e-3 here. Ours stays at float32 resolution.
    x = random_input((4, 64), seed=5, offset=1e4, spread=1.0)
    layer = tfnorm.LayerNormalization()
    layer.build(x.shape)
    randomize_weights(layer)
    gamma, beta = (np.asarray(w, np.float64) for w in layer.get_weights())
    expected = reference.layer_norm(x.astype(np.float64), gamma, beta)
    np.testing.assert_allclose(np.asarray(layer(x)), expected, atol=2e-5)


@pytest.mark.parametrize("matvec", [True, False], ids=["matvec", "reduce"])
@pytest.mark.parametrize("center, scale", [(True, True), (False, True), (True, False)])
@pytest.mark.parametrize(
    "shape, axes", [((3, 5), (1,)), ((2, 3, 4), (1, 2)), ((2, 3, 4), (0, 2))]
)
def test_analytic_gradient_matches_numerical(
    shape, axes, center, scale, matvec, monkeypatch
):
    # matvec: CPU reductions as matrix-vector products (trailing axes only);
    # reduce: the plain reductions used on GPU and for other axes.
    monkeypatch.setattr(
        "tfnorm.layers._ops.routes.ROUTE_OVERRIDE", "matvec" if matvec else "reduce"
    )
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal(shape) * 2 + 1, tf.float64)
    param_shape = [shape[a] if a in axes else 1 for a in range(len(shape))]
    gamma = tf.constant(1 + 0.5 * rng.standard_normal(param_shape), tf.float64)
    beta = tf.constant(0.5 * rng.standard_normal(param_shape), tf.float64)

    def f(x, gamma, beta):
        return _ops.layer_norm(
            x, gamma if scale else None, beta if center else None, axes, 1e-5
        )

    theoretical, numerical = tf.test.compute_gradient(f, [x, gamma, beta])
    for t, n in zip(theoretical, numerical):
        np.testing.assert_allclose(t, n, rtol=1e-6, atol=1e-6)


def _autodiff_layer_norm(x, gamma, beta, axes, epsilon):
    mean = tf.reduce_mean(x, axes, keepdims=True)
    var = tf.reduce_mean(tf.square(x - mean), axes, keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + epsilon) * gamma + beta


@pytest.mark.parametrize("jit_compile", [False, True])
def test_analytic_gradient_matches_autodiff_in_graph_and_xla(jit_compile):
    x = tf.constant(random_input((4, 6, 16), seed=2, offset=3.0))
    layer = tfnorm.LayerNormalization(epsilon=1e-5)
    layer.build(x.shape)
    randomize_weights(layer)
    gamma, beta = (tf.constant(w) for w in layer.get_weights())

    @tf.function(jit_compile=jit_compile)
    def grads():
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([x, gamma, beta])
            ours = tf.reduce_sum(layer(x) * tf.sin(x))
            ref = tf.reduce_sum(
                _autodiff_layer_norm(x, gamma, beta, [2], 1e-5) * tf.sin(x)
            )
        return (
            tape.gradient(ours, [x] + layer.trainable_weights),
            tape.gradient(ref, [x, gamma, beta]),
        )

    ours, ref = grads()
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-4)


def test_gradient_under_mixed_precision_is_float32_and_finite(mixed_policy):
    mixed_policy("mixed_float16")
    layer = tfnorm.LayerNormalization()
    x = tf.constant(
        random_input((4, 32), seed=6, offset=100.0, spread=50.0), tf.float16
    )
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
        loss = tf.reduce_sum(tf.cast(y, tf.float32) ** 2 * 0.0 + tf.cast(y, tf.float32))
    dx, dgamma, dbeta = tape.gradient(loss, [x] + layer.trainable_weights)
    assert y.dtype == tf.float16
    assert dgamma.dtype == tf.float32 and dbeta.dtype == tf.float32
    assert np.all(np.isfinite(np.asarray(tf.cast(dx, tf.float32))))
    # d(sum y)/d beta is the number of rows; d/d gamma is the sum of x_hat.
    np.testing.assert_allclose(np.asarray(dbeta), np.full(32, 4.0))


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_half_precision_statistics_are_float32(policy, mixed_policy):
    # Inputs up to 6e4: their squares overflow float16 (max 65504), so
    # statistics in the input dtype would give inf/NaN.
    x32 = random_input((4, 64), seed=8, offset=3e4, spread=2e4).clip(-6e4, 6e4)
    mixed_policy(policy)
    layer = tfnorm.LayerNormalization()
    half = tf.float16 if policy == "mixed_float16" else tf.bfloat16
    x_half = tf.cast(x32, half)
    y = layer(x_half)
    assert y.dtype == half
    assert [w.dtype for w in layer.weights] == [tf.float32, tf.float32]
    expected = reference.layer_norm(np.asarray(tf.cast(x_half, tf.float64)))
    resolution = 2.0**-10 if policy == "mixed_float16" else 2.0**-7
    actual = np.asarray(tf.cast(y, tf.float64))
    assert np.all(np.isfinite(actual))
    np.testing.assert_allclose(
        actual, expected, atol=2 * resolution * np.abs(expected).max()
    )


def test_inside_mirrored_strategy_matches_single_device(two_device_strategy):
    x = random_input((4, 3, 8), seed=9, offset=1.0)
    single = tfnorm.LayerNormalization()
    single.build(x.shape)
    randomize_weights(single)
    with two_device_strategy.scope():
        mirrored = tfnorm.LayerNormalization()
        mirrored.build(x.shape)
        mirrored.set_weights(single.get_weights())

    @tf.function
    def step(batch):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(mirrored(batch) ** 2)
        return tape.gradient(loss, mirrored.trainable_weights)

    dataset = tf.data.Dataset.from_tensor_slices(x).batch(4)
    batch = next(iter(two_device_strategy.experimental_distribute_dataset(dataset)))
    per_replica = two_device_strategy.run(step, args=(batch,))
    grads = [
        two_device_strategy.reduce(tf.distribute.ReduceOp.SUM, g, axis=None)
        for g in per_replica
    ]
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(single(x) ** 2)
    expected = tape.gradient(loss, single.trainable_weights)
    for a, b in zip(grads, expected):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-4)


def test_default_epsilon_is_keras_own():
    assert (
        tfnorm.LayerNormalization().epsilon == keras.layers.LayerNormalization().epsilon
    )


def test_config_of_this_runtime_keras_layer_loads():
    theirs = keras.layers.LayerNormalization(
        axis=[-2, -1], epsilon=1e-6, beta_regularizer="l2", gamma_constraint="non_neg"
    )
    ours = tfnorm.LayerNormalization.from_config(theirs.get_config())
    assert (ours.axis, ours.epsilon) == ([-2, -1], 1e-6)
    assert ours.beta_regularizer is not None and ours.gamma_constraint is not None


def _serialized(module, class_name, config=None):
    """An object as Keras 3 and tf_keras serialise it."""
    return {
        "module": module,
        "class_name": class_name,
        "config": config or {},
        "registered_name": None,
    }


# Configs as each Keras generation writes them (`get_config()` of an unbuilt
# LayerNormalization with these settings).
KERAS3_CONFIG = {
    "name": "ln",
    "trainable": True,
    "dtype": _serialized("keras", "DTypePolicy", {"name": "mixed_bfloat16"}),
    "axis": [-2, -1],
    "epsilon": 1e-06,
    "center": False,
    "scale": True,
    "rms_scaling": False,
    "beta_initializer": _serialized("keras.initializers", "Zeros"),
    "gamma_initializer": _serialized("keras.initializers", "Ones"),
    "beta_regularizer": None,
    "gamma_regularizer": _serialized("keras.regularizers", "L2", {"l2": 0.01}),
    "beta_constraint": _serialized("keras.constraints", "NonNeg"),
    "gamma_constraint": None,
}
# tf_keras writes the same keys but `rms_scaling`, its own policy class, and
# float32-rounded numbers.
TF_KERAS_CONFIG = {
    **{k: v for k, v in KERAS3_CONFIG.items() if k != "rms_scaling"},
    "dtype": _serialized("keras.mixed_precision", "Policy", {"name": "mixed_bfloat16"}),
    "gamma_initializer": _serialized(
        "keras.initializers", "GlorotUniform", {"seed": None}
    ),
    "gamma_regularizer": _serialized(
        "keras.regularizers", "L2", {"l2": 0.009999999776482582}
    ),
}
KERAS29_CONFIG = {
    "name": "ln",
    "trainable": True,
    "dtype": {"class_name": "Policy", "config": {"name": "mixed_bfloat16"}},
    "axis": [-2, -1],
    "epsilon": 1e-06,
    "center": False,
    "scale": True,
    "beta_initializer": {"class_name": "Zeros", "config": {}},
    "gamma_initializer": {"class_name": "GlorotUniform", "config": {"seed": None}},
    "beta_regularizer": None,
    "gamma_regularizer": {"class_name": "L2", "config": {"l2": 0.009999999776482582}},
    "beta_constraint": {"class_name": "NonNeg", "config": {}},
    "gamma_constraint": None,
}


@pytest.mark.parametrize(
    "config",
    [KERAS3_CONFIG, TF_KERAS_CONFIG, KERAS29_CONFIG],
    ids=["keras3", "tf_keras", "keras2.9"],
)
def test_keras_config_of_either_generation_loads(config):
    layer = tfnorm.LayerNormalization.from_config(dict(config))
    assert layer.axis == [-2, -1] and layer.epsilon == 1e-6
    assert (layer.center, layer.scale) == (False, True)
    assert layer.dtype_policy.name == "mixed_bfloat16"
    assert layer.gamma_regularizer is not None
    assert layer.beta_constraint is not None
    x = random_input((2, 3, 4), seed=21, offset=1.0)
    y = layer(x)
    assert y.dtype == tf.bfloat16
    assert [tuple(w.shape) for w in layer.weights] == [(3, 4)]
    assert len(layer.losses) == 1
    expected = reference.layer_norm(
        x.astype(np.float64), np.asarray(layer.gamma, np.float64), None, [-2, -1], 1e-6
    )
    assert_close(y, expected, "bfloat16", scale=np.abs(expected).max())


def test_rms_scaling_false_is_accepted_and_true_names_rmsnorm():
    assert tfnorm.LayerNormalization(rms_scaling=False).epsilon == 1e-3
    with pytest.raises(ValueError, match=r"tfnorm\.RMSNorm.*rms_scaling=True"):
        tfnorm.LayerNormalization(rms_scaling=True)
    with pytest.raises(ValueError, match=r"tfnorm\.RMSNorm.*rms_scaling=True"):
        tfnorm.LayerNormalization.from_config(dict(KERAS3_CONFIG, rms_scaling=True))


def _half_ulp_errors(actual, expected, mantissa_bits):
    """|actual - expected| in units of the half type's spacing at `expected`."""
    actual = np.asarray(tf.cast(actual, tf.float64))
    magnitude = np.maximum(np.abs(expected), 2.0**-14)
    spacing = 2.0 ** (np.floor(np.log2(magnitude)) - mantissa_bits)
    return np.abs(actual - expected) / spacing


@pytest.mark.parametrize(
    "policy, half, mantissa_bits",
    [("mixed_float16", tf.float16, 10), ("mixed_bfloat16", tf.bfloat16, 7)],
)
def test_float32_input_under_mixed_policy_gives_statistics_of_the_float32_input(
    policy, half, mantissa_bits, mixed_policy
):
    x = random_input((64, 256), seed=22, offset=2.0, spread=3.0)
    expected = reference.layer_norm(x.astype(np.float64))
    mixed_policy(policy)
    layer = tfnorm.LayerNormalization()
    y = layer(x)
    assert y.dtype == half
    # The float64 result rounded once to the half type: within one spacing.
    assert _half_ulp_errors(y, expected, mantissa_bits).max() <= 1.0
    # Control: statistics of the input first rounded to the half type (the
    # old behaviour) miss that bound, so the check above can tell them apart.
    rounded = layer(tf.cast(x, half))
    assert _half_ulp_errors(rounded, expected, mantissa_bits).max() > 1.0


# What tfnorm 0.1.0 (before weight_layout) wrote for LayerNormalization(
# axis=[-1, -2], name="old_ln"): no `weight_layout` key, and weights with
# dims in the order of `axis`, transposed into place.
OLD_TFNORM_CONFIG = {
    "name": "old_ln",
    "trainable": True,
    "dtype": "float32",
    "axis": [-1, -2],
    "epsilon": 1e-05,
    "center": True,
    "scale": True,
    "beta_initializer": {"class_name": "Zeros", "config": {}},
    "gamma_initializer": {"class_name": "Ones", "config": {}},
    "beta_regularizer": None,
    "gamma_regularizer": None,
    "beta_constraint": None,
    "gamma_constraint": None,
}


def _old_layout_weights(seed=23):
    rng = np.random.default_rng(seed)
    # (4, 3): dim 0 runs along input dim -1, dim 1 along input dim -2.
    gamma = (1.0 + 0.5 * rng.standard_normal((4, 3))).astype("float32")
    beta = (0.5 * rng.standard_normal((4, 3))).astype("float32")
    return gamma, beta


def _old_layout_reference(x, gamma, beta, epsilon=1e-5):
    return reference.layer_norm(
        x.astype(np.float64),
        gamma.T.astype(np.float64),
        beta.T.astype(np.float64),
        [-2, -1],
        epsilon,
    )


def test_config_of_tfnorm_0_1_loads_with_its_old_weight_layout():
    layer = tfnorm.LayerNormalization.from_config(dict(OLD_TFNORM_CONFIG))
    assert layer.weight_layout == "axis_order"
    layer.build((2, 3, 4))
    gamma, beta = _old_layout_weights()
    layer.set_weights([gamma, beta])
    x = random_input((2, 3, 4), seed=24, offset=1.0)
    assert_close(layer(x), _old_layout_reference(x, gamma, beta))
    # Saved again, it keeps reading its weights the old way.
    assert layer.get_config()["weight_layout"] == "axis_order"


def test_new_configs_of_several_axes_record_the_keras_layout():
    config = tfnorm.LayerNormalization(axis=[-1, -2]).get_config()
    assert config["weight_layout"] == "keras"
    assert tfnorm.LayerNormalization.from_config(config).weight_layout == "keras"
    assert "weight_layout" not in tfnorm.LayerNormalization(axis=-1).get_config()


def _saved_config(path, new_config=None):
    """The model config in a .keras or .h5 file; rewritten when given."""
    if path.endswith(".keras"):
        import zipfile

        with zipfile.ZipFile(path) as archive:
            entries = {n: archive.read(n) for n in archive.namelist()}
        if new_config is not None:
            entries["config.json"] = json.dumps(new_config).encode()
            with zipfile.ZipFile(path, "w") as archive:
                for name, data in entries.items():
                    archive.writestr(name, data)
        return json.loads(entries["config.json"])
    import h5py

    with h5py.File(path, "r+") as f:
        if new_config is not None:
            f.attrs["model_config"] = json.dumps(new_config)
        raw = f.attrs["model_config"]
        return json.loads(raw.decode() if isinstance(raw, bytes) else raw)


def _strip_weight_layout(node):
    if isinstance(node, dict):
        node.pop("weight_layout", None)
        for value in node.values():
            _strip_weight_layout(value)
    elif isinstance(node, list):
        for value in node:
            _strip_weight_layout(value)
    return node


def test_model_saved_by_tfnorm_0_1_reloads_with_identical_outputs(tmp_path):
    # A model file as tfnorm 0.1.0 saved it: built here with the old layout,
    # then its config stripped of `weight_layout`, as that version wrote it.
    inputs = keras.Input(shape=(3, 4))
    layer = tfnorm.LayerNormalization(
        axis=[-1, -2], epsilon=1e-5, weight_layout="axis_order"
    )
    model = keras.Model(inputs, layer(inputs))
    gamma, beta = _old_layout_weights()
    layer.set_weights([gamma, beta])
    x = random_input((2, 3, 4), seed=25, offset=1.0)
    expected = _old_layout_reference(x, gamma, beta)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "expected.npy", expected)
    paths = []
    for fmt in ("keras", "h5"):
        if fmt in _keras.SAVE_FORMATS:
            path = _keras.save_model(model, str(tmp_path / "old"), fmt)
            assert "weight_layout" in json.dumps(_saved_config(path))
            config = _saved_config(path, _strip_weight_layout(_saved_config(path)))
            assert "weight_layout" not in json.dumps(config)
            paths.append(path)
    assert paths, _keras.SAVE_FORMATS
    out = run_python(
        f"""
        import numpy as np, tensorflow as tf
        import tfnorm
        x = np.load({str(tmp_path / "x.npy")!r})
        expected = np.load({str(tmp_path / "expected.npy")!r})
        for path in {paths!r}:
            model = tf.keras.models.load_model(path, compile=False)
            assert model.layers[-1].weight_layout == "axis_order"
            np.testing.assert_allclose(model(x), expected, rtol=1e-5, atol=1e-5)
            print("same outputs", path)
        """
    )
    assert out.count("same outputs") == len(paths), out


@pytest.mark.parametrize("key", ["center", "scale"])
@pytest.mark.parametrize("value", ["false", "False", 0, 1, None, [True]])
def test_center_and_scale_must_be_real_booleans(key, value):
    # bool("false") is True: a string from a config would switch the weight on.
    with pytest.raises(ValueError, match=rf"`{key}` must be True or False.*{key}="):
        tfnorm.LayerNormalization(**{key: value})


def test_numpy_booleans_are_booleans():
    layer = tfnorm.LayerNormalization(center=np.bool_(False))
    assert layer.center is False


@pytest.mark.parametrize("source_layout", ["axis_order", "keras"])
@pytest.mark.parametrize("target_layout", ["axis_order", "keras"])
def test_weights_move_between_layouts_in_input_order(source_layout, target_layout):
    x = random_input((2, 3, 4, 5), seed=2)
    source = tfnorm.LayerNormalization(axis=[-1, -3], weight_layout=source_layout)
    target = tfnorm.LayerNormalization(axis=[-1, -3], weight_layout=target_layout)
    source.build(x.shape)
    target.build(x.shape)
    rng = np.random.default_rng(0)
    source.set_weights([rng.standard_normal(w.shape) for w in source.weights])
    values = source.weights_in_input_order()
    # Keras's layout: entries in the order of the input's dims (3, then 5).
    assert [v.size for v in values] == [15, 15]
    target.set_weights_in_input_order(values)
    np.testing.assert_allclose(target(x), source(x), rtol=1e-6, atol=1e-6)

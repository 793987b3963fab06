"""`tfnorm.replace_norms`: Keras norms to tfnorm's and back, same outputs."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tfnorm
from tests.conftest import run_python
from tests.testing import random_input
from tfnorm import _keras
from tfnorm._keras import keras, keras_rms_normalization

KerasRMS = keras_rms_normalization()
needs_keras_rms = pytest.mark.skipif(
    KerasRMS is None, reason="keras.layers.RMSNormalization exists only from Keras 3.9"
)


def _randomize(model, seed=0):
    """Non-trivial weights everywhere (γ around 1, β around 0)."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        values = layer.get_weights()
        if values:
            layer.set_weights(
                [
                    (1.0 if v.ndim == 1 else 0.0) + 0.3 * rng.standard_normal(v.shape)
                    for v in values
                ]
            )
    return model


def _norm_types(model):
    types = []
    for layer in model.layers:
        if _keras.is_graph_model(layer):
            types += _norm_types(layer)
        elif tfnorm.layers.is_norm_layer(layer):
            types.append(type(layer))
    return types


def _layer_names(model):
    # Input layers are renamed by `clone_model` in Keras 3.
    return [
        layer.name
        for layer in model.layers
        if not isinstance(layer, keras.layers.InputLayer)
    ]


def _sequential():
    layers = [
        keras.Input((5, 6)),
        keras.layers.Dense(6),
        keras.layers.LayerNormalization(epsilon=1e-6, name="ln"),
        keras.layers.Dense(6),
        keras.layers.LayerNormalization(axis=[-1, -2], name="ln_unsorted"),
    ]
    if KerasRMS is not None:
        layers.append(KerasRMS(name="rms"))
    return _randomize(keras.Sequential(layers))


def _functional_nested():
    inner = keras.Sequential(
        [keras.Input((5, 6)), keras.layers.Dense(6), keras.layers.LayerNormalization()],
        name="inner",
    )
    inputs = keras.Input((5, 6))
    shared = keras.layers.LayerNormalization(axis=[1, 2], center=False, name="shared")
    x = inner(shared(inputs))
    y = shared(keras.layers.Dense(6)(x))
    outputs = keras.layers.Add()([x, y])
    return _randomize(keras.Model(inputs, outputs, name="outer"))


def _assert_same_outputs(a, b, x):
    np.testing.assert_allclose(np.asarray(a(x)), np.asarray(b(x)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "make", [_sequential, _functional_nested], ids=["sequential", "nested"]
)
def test_to_tfnorm_and_back_keeps_outputs_and_weights(make):
    model = make()
    x = random_input((3, 5, 6), seed=1, offset=0.5)
    keras_types = _norm_types(model)

    moved = tfnorm.replace_norms(model, to="tfnorm")
    assert all(t.__module__.startswith("tfnorm.") for t in _norm_types(moved))
    assert len(_norm_types(moved)) == len(keras_types)
    _assert_same_outputs(model, moved, x)
    for a, b in zip(model.get_weights(), moved.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert _norm_types(model) == keras_types  # the original is untouched

    back = tfnorm.replace_norms(moved, to="keras")
    assert _norm_types(back) == keras_types
    _assert_same_outputs(model, back, x)
    assert _layer_names(back) == _layer_names(model)


def test_epsilon_and_options_carry_over():
    model = _sequential()
    moved = tfnorm.replace_norms(model)
    ln = moved.get_layer("ln")
    assert isinstance(ln, tfnorm.LayerNormalization)
    assert ln.epsilon == 1e-6 and ln.center and ln.scale
    assert moved.get_layer("ln_unsorted").epsilon == 1e-3  # Keras's default


def test_old_tfnorm_weight_layout_converts_to_keras():
    inputs = keras.Input((3, 4))
    norm = tfnorm.LayerNormalization(axis=[-1, -2], weight_layout="axis_order")
    model = _randomize(keras.Model(inputs, norm(inputs)))
    x = random_input((2, 3, 4), seed=2)
    back = tfnorm.replace_norms(model, to="keras")
    assert type(back.layers[-1]) is keras.layers.LayerNormalization
    _assert_same_outputs(model, back, x)


@pytest.mark.parametrize(
    "norm",
    [
        tfnorm.ScaleNorm(name="the_norm"),
        tfnorm.RMSNorm(center=True, name="the_norm"),
        tfnorm.RMSNorm(partial=0.5, name="the_norm"),
    ],
    ids=["scale_norm", "rms_center", "rms_partial"],
)
def test_norm_without_keras_equivalent_is_named(norm):
    inputs = keras.Input((8,))
    model = keras.Model(inputs, norm(keras.layers.Dense(8)(inputs)))
    with pytest.raises(
        ValueError, match=r"Keras has no equivalent of layer 'the_norm'"
    ):
        tfnorm.replace_norms(model, to="keras")


@needs_keras_rms
def test_plain_rms_norm_goes_to_keras_rms_normalization():
    inputs = keras.Input((8,))
    model = _randomize(keras.Model(inputs, tfnorm.RMSNorm(epsilon=1e-5)(inputs)))
    back = tfnorm.replace_norms(model, to="keras")
    assert type(back.layers[-1]) is KerasRMS and back.layers[-1].epsilon == 1e-5
    _assert_same_outputs(model, back, random_input((4, 8), seed=3))


@pytest.mark.skipif(not _keras.IS_KERAS_3, reason="rms_scaling exists in Keras 3 only")
def test_keras_rms_scaling_is_named():
    inputs = keras.Input((8,))
    with pytest.warns(UserWarning):
        norm = keras.layers.LayerNormalization(rms_scaling=True, name="odd")
    model = keras.Model(inputs, norm(inputs))
    with pytest.raises(ValueError, match=r"'odd'.*rms_scaling=True.*tfnorm\.RMSNorm"):
        tfnorm.replace_norms(model)


def test_bad_target_and_subclassed_model_are_rejected():
    with pytest.raises(ValueError, match=r"Received: to='torch'"):
        tfnorm.replace_norms(_sequential(), to="torch")

    class Subclassed(keras.Model):
        def __init__(self):
            super().__init__(name="sub")
            self.norm = keras.layers.LayerNormalization()

        def call(self, x):
            return self.norm(x)

    with pytest.raises(ValueError, match=r"subclassed model.*Received: model='sub'"):
        tfnorm.replace_norms(Subclassed())


def test_norms_inside_a_composite_layer_are_named_and_nothing_converts():
    inputs = keras.Input((6, 16))
    block = tfnorm.TransformerEncoderBlock(16, 4, 32, dropout_rate=0.0, name="block")
    x = keras.layers.LayerNormalization(name="outer_ln")(block(inputs))
    model = keras.Model(inputs, x)
    with pytest.raises(
        ValueError, match=r"Layer 'block' .*creates its norms.*'attention_norm'"
    ):
        tfnorm.replace_norms(model, to="keras")
    # With nothing to swap inside it, the block is copied as it is.
    moved = tfnorm.replace_norms(model, to="tfnorm")
    assert isinstance(moved.get_layer("outer_ln"), tfnorm.LayerNormalization)
    _assert_same_outputs(model, moved, random_input((2, 6, 16), seed=4))


def test_saved_copies_reload_in_fresh_processes(tmp_path):
    model = _functional_nested()
    x = random_input((3, 5, 6), seed=5)
    moved = tfnorm.replace_norms(model, to="tfnorm")
    back = tfnorm.replace_norms(moved, to="keras")
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "expected.npy", np.asarray(model(x)))
    moved_path = _keras.save_model(moved, str(tmp_path / "moved"))
    back_path = _keras.save_model(back, str(tmp_path / "back"))
    check = """
        import numpy as np, tensorflow as tf
        {imports}
        x = np.load({x!r})
        expected = np.load({expected!r})
        model = tf.keras.models.load_model({path!r}, compile=False)
        modules = set()
        def walk(m):
            for layer in m.layers:
                if hasattr(layer, "layers"):
                    walk(layer)
                elif "Normalization" in type(layer).__name__ or "Norm" in type(layer).__name__:
                    modules.add(type(layer).__module__.split(".")[0])
        walk(model)
        np.testing.assert_allclose(model(x), expected, rtol=1e-5, atol=1e-5)
        print("norms from", sorted(modules))
        {extra}
    """
    files = {"x": str(tmp_path / "x.npy"), "expected": str(tmp_path / "expected.npy")}
    out = run_python(
        check.format(imports="import tfnorm", path=moved_path, extra="", **files)
    )
    assert "norms from ['tfnorm']" in out, out
    # Shipped without tfnorm: the process never imports it.
    out = run_python(
        check.format(
            imports="import sys",
            path=back_path,
            extra="assert 'tfnorm' not in sys.modules",
            **files,
        ),
        env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )
    assert "tfnorm" not in out.split("norms from")[1], out


@pytest.mark.skipif(not _keras.IS_KERAS_3, reason="keras-hub layers are Keras 3 layers")
def test_keras_hub_transformer_encoder_is_named_not_half_converted():
    keras_hub = pytest.importorskip("keras_hub", reason="keras-hub is not installed")
    inputs = keras.Input((6, 16))
    encoder = keras_hub.layers.TransformerEncoder(32, 4, name="hub_encoder")
    x = encoder(inputs)
    outputs = keras.layers.LayerNormalization(name="final_ln")(x)
    model = keras.Model(inputs, outputs)
    with pytest.raises(
        ValueError,
        match=r"Layer 'hub_encoder' \(keras_hub.*TransformerEncoder\) creates its norms "
        r"\('self_attention_layer_norm', 'feedforward_layer_norm'\)",
    ):
        tfnorm.replace_norms(model, to="tfnorm")
    # The model was not touched.
    assert type(model.get_layer("final_ln")) is keras.layers.LayerNormalization
    assert type(encoder._self_attention_layer_norm) is keras.layers.LayerNormalization


@pytest.mark.skipif(KerasRMS is not None, reason="this Keras has RMSNormalization")
def test_rms_norm_before_keras_3_9_is_named():
    inputs = keras.Input((8,))
    model = keras.Model(inputs, tfnorm.RMSNorm(name="rms")(inputs))
    with pytest.raises(
        ValueError, match=r"layer 'rms'.*RMSNormalization \(Keras >= 3\.9\)"
    ):
        tfnorm.replace_norms(model, to="keras")

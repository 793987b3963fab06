"""`tfnorm.replace_norms` (tfnorm/models/norm_swap/swap.py): Keras norms to
tfnorm's and back, same outputs."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tfnorm
from tests.conftest import run_python
from tests.models import user_models
from tests.testing import import_keras_hub, random_input
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


@pytest.mark.skipif(KerasRMS is not None, reason="this Keras has RMSNormalization")
def test_rms_norm_before_keras_3_9_is_named():
    inputs = keras.Input((8,))
    model = keras.Model(inputs, tfnorm.RMSNorm(name="rms")(inputs))
    with pytest.raises(
        ValueError, match=r"layer 'rms'.*RMSNormalization \(Keras >= 3\.9\)"
    ):
        tfnorm.replace_norms(model, to="keras")


# -- Norms nested in user code (keras.io-style subclassed blocks) -------------

USER_MODELS = {
    "text_classifier": user_models.text_classifier,
    "mini_gpt": user_models.mini_gpt,
    "translator": user_models.translator,
}


def _user_model(name):
    model = USER_MODELS[name]()
    user_models.randomize_norms(model)
    x = user_models.token_batch()
    return model, ([x, x] if name == "translator" else x)


def _norm_modules(model):
    from tfnorm.callbacks import find_norm_layers

    return {
        type(layer).__module__.split(".")[0] for _, layer in find_norm_layers(model)
    }


@pytest.mark.parametrize("name", sorted(USER_MODELS))
def test_user_blocks_convert_in_place_train_and_go_back(name):
    model, x = _user_model(name)
    expected = np.asarray(model(x))
    count = len(model.weights)
    assert tfnorm.replace_norms(model, inplace=True) is model
    assert _norm_modules(model) == {"tfnorm"}
    assert len(model.weights) == len(model.trainable_weights) == count
    np.testing.assert_allclose(np.asarray(model(x)), expected, atol=1e-5)
    # The swapped norms are the ones trained.
    model.compile("sgd", "sparse_categorical_crossentropy")
    before = [np.array(w) for w in model.weights]
    y = np.zeros(np.asarray(expected).shape[:-1], "int32")
    model.fit(x, y, epochs=1, batch_size=len(y), verbose=0)
    changed = [not np.allclose(a, np.asarray(b)) for a, b in zip(before, model.weights)]
    norm_ids = {
        id(v) for _, layer in _find_norms(model) for v in layer.trainable_weights
    }
    assert norm_ids and all(
        c for c, v in zip(changed, model.weights) if id(v) in norm_ids
    )
    trained = np.asarray(model(x))
    tfnorm.replace_norms(model, to="keras", inplace=True)
    assert _norm_modules(model) == {
        "keras" if _keras.FLAVOUR != "tf_keras" else "tf_keras"
    }
    np.testing.assert_allclose(np.asarray(model(x)), trained, atol=1e-5)


def _find_norms(model):
    from tfnorm.callbacks import find_norm_layers

    return find_norm_layers(model)


@pytest.mark.skipif(
    not _keras.IS_KERAS_3, reason="Keras 2 copies layers without a get_config"
)
def test_a_layer_without_a_complete_config_is_named_and_nothing_changes():
    model, x = _user_model("text_classifier")
    expected = np.asarray(model(x))
    with pytest.raises(
        ValueError,
        match=r"(?s)Layer 'token_and_position_embedding\w*' .*cannot be rebuilt from "
        r"its config.*inplace=True",
    ):
        tfnorm.replace_norms(model)
    assert _norm_modules(model) == {"keras"}
    np.testing.assert_array_equal(np.asarray(model(x)), expected)


class _TwoNorms(keras.layers.Layer):
    """A user block holding its norms in a list, one without a Keras twin."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.norms = [tfnorm.LayerNormalization(), tfnorm.ScaleNorm(name="odd_norm")]

    def call(self, x):
        return self.norms[1](self.norms[0](x))


def test_an_unconvertible_nested_norm_names_its_path_and_nothing_changes():
    inputs = keras.Input((4, 8))
    model = keras.Model(inputs, _TwoNorms(name="block")(inputs))
    with pytest.raises(ValueError, match=r"layer 'block/odd_norm'.*ScaleNorm"):
        tfnorm.replace_norms(model, to="keras", inplace=True)
    assert _norm_modules(model) == {"tfnorm"}


def test_a_norm_whose_formula_differs_is_refused_and_the_rest_kept():
    class FancyRMSNorm(keras.layers.Layer):
        # Named like an RMS norm, but it centres: not what tfnorm assumes.
        def __init__(self, epsilon=1e-6, **kwargs):
            super().__init__(**kwargs)
            self.epsilon = epsilon

        def build(self, input_shape):
            self.scale = self.add_weight(
                name="scale", shape=(input_shape[-1],), initializer="ones"
            )

        def call(self, x):
            x = x - tf_mean(x)
            return x * self.scale

    from tfnorm._keras import tf

    def tf_mean(x):
        return tf.reduce_mean(x, axis=-1, keepdims=True)

    inputs = keras.Input((4, 8))
    h = keras.layers.LayerNormalization(name="plain")(inputs)
    block = user_models.TransformerEncoder(8, 16, 2, name="block")
    h = block(h)
    fancy = FancyRMSNorm(name="fancy")
    h = fancy(h)
    model = keras.Model(inputs, h)
    with pytest.raises(ValueError, match=r"Layer 'fancy' .*disagree by"):
        tfnorm.replace_norms(model, inplace=True)
    # Put back: the two norms swapped before it are Keras's again.
    assert type(model.get_layer("plain")) is keras.layers.LayerNormalization
    assert type(block.layernorm_1) is keras.layers.LayerNormalization


def test_saved_user_model_reloads_with_keras_norms_and_same_outputs(tmp_path):
    model, x = _user_model("mini_gpt")
    tfnorm.replace_norms(model, inplace=True)
    expected = np.asarray(model(x))
    # keras.io's blocks have no get_config: weights only, as users save them.
    path = str(tmp_path / ("model.weights.h5" if _keras.IS_KERAS_3 else "model.h5"))
    model.save_weights(path)
    fresh = user_models.mini_gpt()
    fresh(x)
    fresh.load_weights(path)
    assert _norm_modules(fresh) == {
        "keras" if _keras.FLAVOUR != "tf_keras" else "tf_keras"
    }
    np.testing.assert_allclose(np.asarray(fresh(x)), expected, atol=1e-5)


# -- keras-hub backbones from tiny configs (no downloads) ---------------------


def _backbone(name):
    keras_hub = import_keras_hub()
    models = keras_hub.models
    small = {"vocabulary_size": 50, "num_layers": 2, "hidden_dim": 8}
    if name == "bert":
        return models.BertBackbone(
            num_heads=2, intermediate_dim=16, max_sequence_length=12, **small
        )
    if name == "gpt2":
        return models.GPT2Backbone(
            num_heads=2, intermediate_dim=16, max_sequence_length=12, **small
        )
    if name == "llama":
        return models.LlamaBackbone(
            num_query_heads=2, num_key_value_heads=1, intermediate_dim=16, **small
        )
    return models.GemmaBackbone(
        num_query_heads=2,
        num_key_value_heads=1,
        intermediate_dim=16,
        head_dim=4,
        **small,
    )


def _backbone_inputs(name):
    x = {
        "token_ids": user_models.token_batch(),
        "padding_mask": np.ones((4, user_models.MAXLEN), "int32"),
    }
    if name == "bert":
        x["segment_ids"] = np.zeros((4, user_models.MAXLEN), "int32")
    return x


def _sequence(model, x):
    out = model(x)
    return np.asarray(out["sequence_output"] if isinstance(out, dict) else out)


HUB_NORMS = {
    "bert": "LayerNormalization",
    "gpt2": "LayerNormalization",
    "llama": "LlamaLayerNorm",
    "gemma": "RMSNormalization",
}


@pytest.mark.parametrize("name", sorted(HUB_NORMS))
def test_keras_hub_backbone_converts_trains_reloads_and_goes_back(name, tmp_path):
    keras.utils.set_random_seed(0)  # the same backbone on every run
    backbone = _backbone(name)
    user_models.randomize_norms(backbone)
    x = _backbone_inputs(name)
    expected = _sequence(backbone, x)
    hub_norms = [layer for _, layer in _find_norms(backbone)]
    moved = tfnorm.replace_norms(backbone)
    assert type(moved) is type(backbone)
    norms = [layer for _, layer in _find_norms(moved)]
    assert norms and all(type(n).__module__.startswith("tfnorm.") for n in norms)
    if name == "gemma":  # Gemma scales by 1 + w.
        assert all(n.zero_centered_gamma for n in norms)
    if name == "llama":
        assert {n.epsilon for n in norms} == {1e-6}
    # Each norm alone agrees to float32 rounding ...
    probe = random_input((4, 6, 8), seed=3)
    for hub_norm, norm in zip(hub_norms, norms):
        np.testing.assert_allclose(
            np.asarray(norm(probe)), np.asarray(hub_norm(probe)), rtol=2e-6, atol=2e-6
        )
    # ... and through the stack that rounding grows: Gemma's norm takes
    # 1 / sqrt where tfnorm takes rsqrt, and over 12 random Gemma builds the
    # outputs (of order 5) differed by up to 4.6e-5.
    tolerance = 1e-4 if name == "gemma" else 1e-5
    np.testing.assert_allclose(_sequence(moved, x), expected, rtol=1e-5, atol=tolerance)
    assert [type(n).__name__ for _, n in _find_norms(backbone)][0] == HUB_NORMS[name]

    # One training step moves the swapped norms.
    before = [np.array(w) for n in norms for w in n.weights]
    optimizer = keras.optimizers.SGD(0.1)
    from tfnorm._keras import tf

    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(
            tf.square(moved(x)["sequence_output"] if name == "bert" else moved(x))
        )
    grads = tape.gradient(loss, moved.trainable_weights)
    optimizer.apply_gradients(zip(grads, moved.trainable_weights))
    after = [np.array(w) for n in norms for w in n.weights]
    assert any(not np.allclose(a, b) for a, b in zip(before, after))
    trained = _sequence(moved, x)

    # Saved after going back, it reloads with keras-hub's own norms and the
    # same outputs (README: a converted backbone is saved that way).
    path = str(tmp_path / "backbone.keras")
    tfnorm.replace_norms(moved, to="keras").save(path)
    reloaded = keras.models.load_model(path)
    assert {type(n).__name__ for _, n in _find_norms(reloaded)} == {HUB_NORMS[name]}
    np.testing.assert_allclose(_sequence(reloaded, x), trained, rtol=1e-5, atol=1e-5)

    back = tfnorm.replace_norms(moved, to="keras")
    assert {type(n).__name__ for _, n in _find_norms(back)} == {HUB_NORMS[name]}
    np.testing.assert_allclose(_sequence(back, x), trained, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(HUB_NORMS))
def test_keras_hub_backbone_trained_after_conversion_saves_what_it_learned(
    name, tmp_path
):
    # The weights change after the conversion, as in fine-tuning: a file
    # holding the replaced norms' (initial) weights would show here, as would
    # a top-level norm filed under another class name (Llama's final norm).
    backbone = _backbone(name)
    x = _backbone_inputs(name)
    moved = tfnorm.replace_norms(backbone)
    user_models.randomize_norms(moved, seed=5)
    path = str(tmp_path / "backbone.keras")
    moved.save(path)
    reloaded = keras.models.load_model(path)
    for (_, saved), (_, loaded) in zip(_find_norms(moved), _find_norms(reloaded)):
        np.testing.assert_array_equal(
            np.asarray(loaded.weights[0]), np.asarray(saved.weights[0])
        )
    # Reloaded, Gemma's norms are keras-hub's again (1 / sqrt, not rsqrt).
    tolerance = 1e-4 if name == "gemma" else 1e-5
    np.testing.assert_allclose(
        _sequence(reloaded, x), _sequence(moved, x), rtol=1e-5, atol=tolerance
    )


def _h5_datasets(path):
    import h5py

    found = []
    with h5py.File(path, "r") as file:
        file.visititems(
            lambda name, item: (
                found.append(name) if isinstance(item, h5py.Dataset) else None
            )
        )
    return found


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_keras_hub_backbone_checkpoints_hold_only_the_variables_it_uses(name, tmp_path):
    from tfnorm._keras import tf

    x = _backbone_inputs(name)
    moved = tfnorm.replace_norms(_backbone(name))
    user_models.randomize_norms(moved, seed=7)
    weights_file = str(tmp_path / "backbone.weights.h5")
    moved.save_weights(weights_file)
    assert len(_h5_datasets(weights_file)) == len(moved.weights)

    prefix = tf.train.Checkpoint(model=moved).write(str(tmp_path / "ckpt"))
    fresh = tfnorm.replace_norms(_backbone(name))
    tf.train.Checkpoint(model=fresh).read(prefix).assert_consumed()
    np.testing.assert_allclose(
        _sequence(fresh, x), _sequence(moved, x), rtol=1e-5, atol=1e-5
    )


def test_keras_hub_encoder_inside_a_user_model_converts_in_a_copy():
    keras_hub = import_keras_hub()
    inputs = keras.Input((6, 16))
    encoder = keras_hub.layers.TransformerEncoder(32, 4, name="hub_encoder")
    outputs = keras.layers.LayerNormalization(name="final_ln")(encoder(inputs))
    model = keras.Model(inputs, outputs)
    user_models.randomize_norms(model)
    x = random_input((2, 6, 16), seed=6)
    moved = tfnorm.replace_norms(model)
    assert [
        p for p, n in _find_norms(moved) if type(n).__module__.startswith("tfnorm")
    ] == [
        "hub_encoder/self_attention_layer_norm",
        "hub_encoder/feedforward_layer_norm",
        "final_ln",
    ]
    _assert_same_outputs(model, moved, x)
    # The original was not touched.
    assert type(encoder._self_attention_layer_norm) is keras.layers.LayerNormalization


# -- compiled models and masks -------------------------------------------------


def _compiled_model(seed=0, kind="functional"):
    keras.utils.set_random_seed(seed)
    layers = [
        keras.layers.Dense(6),
        keras.layers.LayerNormalization(name="ln"),
        keras.layers.Dense(1),
    ]
    if kind == "sequential":
        model = keras.Sequential([keras.Input((6,))] + layers, name="sequential")
    else:
        inputs = keras.Input((6,))
        x = inputs
        for layer in layers:
            x = layer(x)
        model = keras.Model(inputs, x)
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    return model


def _regression_data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((16, 6)).astype("float32"), rng.standard_normal(
        (16, 1)
    ).astype("float32")


@pytest.mark.parametrize("kind", ["functional", "sequential"])
def test_converted_in_place_a_compiled_model_trains_on_as_if_unconverted(kind):
    # Keras 3's Sequential once refused: "Layer 'ln' could not be replaced".
    x, y = _regression_data()
    reference, converted = _compiled_model(kind=kind), _compiled_model(kind=kind)
    for model in (reference, converted):
        model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    tfnorm.replace_norms(converted, inplace=True)
    assert type(converted.get_layer("ln")).__module__.startswith("tfnorm.")
    for model in (reference, converted):
        model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    # Same steps, same Adam moments: the new norm's weights moved as the
    # old one's would have.
    assert int(converted.optimizer.iterations) == int(reference.optimizer.iterations)
    for new, old in zip(
        converted.get_layer("ln").weights, reference.get_layer("ln").weights
    ):
        np.testing.assert_allclose(np.asarray(new), np.asarray(old), atol=1e-5)
    _assert_same_outputs(converted, reference, x)


@pytest.mark.parametrize("kind", ["functional", "sequential"])
def test_a_copy_of_a_compiled_model_says_its_optimizer_starts_afresh(kind):
    x, y = _regression_data()
    model = _compiled_model(kind=kind)
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    with pytest.warns(UserWarning, match="starts afresh.*inplace=True"):
        copy = tfnorm.replace_norms(model)
    if _keras.is_compiled(copy):
        assert copy.optimizer is not model.optimizer
    assert _keras.is_compiled(model)
    # What the warning recommends works on the same model.
    optimizer = model.optimizer
    assert tfnorm.replace_norms(model, inplace=True) is model
    assert model.optimizer is optimizer
    assert type(model.get_layer("ln")).__module__.startswith("tfnorm.")
    assert [type(layer) for layer in model.layers] == [
        type(layer) for layer in copy.layers
    ]


def _embedding_model():
    ids = keras.Input((5,), dtype="int32")
    x = keras.layers.Embedding(10, 8, mask_zero=True)(ids)
    x = keras.layers.LayerNormalization(name="ln")(x)
    return keras.Model(ids, keras.layers.GlobalAveragePooling1D()(x))


def _masking_model():
    inputs = keras.Input((5, 8))
    x = keras.layers.Masking()(inputs)
    x = keras.layers.LayerNormalization(name="ln")(x)
    return keras.Model(inputs, keras.layers.LSTM(3)(x))


def _build_encoder_model():
    # README: an implicit mask from the embedding reaches build_encoder.
    ids = keras.Input((5,), dtype="int32")
    x = keras.layers.Embedding(10, 8, mask_zero=True)(ids)
    encoder = tfnorm.build_encoder(
        1, 8, 2, 16, dropout_rate=0.0, with_padding_mask=False, name="encoder"
    )
    x = keras.layers.LayerNormalization(name="ln")(encoder(x))
    return keras.Model(ids, keras.layers.GlobalAveragePooling1D()(x))


@pytest.mark.parametrize(
    "make, padded",
    [
        (_embedding_model, "ids"),
        (_masking_model, "zeros"),
        (_build_encoder_model, "ids"),
    ],
    ids=["embedding_mask_zero", "masking", "build_encoder"],
)
def test_a_model_whose_mask_is_used_downstream_converts(make, padded):
    keras.utils.set_random_seed(0)
    model = _randomize(make())
    if padded == "ids":
        x = np.array([[3, 4, 5, 0, 0], [1, 2, 9, 7, 0]], "int32")
    else:
        x = random_input((2, 5, 8), seed=1)
        x[0, 3:] = 0.0
    moved = tfnorm.replace_norms(model)
    assert type(moved.get_layer("ln")).__module__.startswith("tfnorm.")
    # The padding positions hold values that change the result unless the
    # mask reaches the pooling / LSTM after the norm.
    _assert_same_outputs(moved, model, x)

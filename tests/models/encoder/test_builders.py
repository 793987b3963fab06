from __future__ import annotations

import os
import re
import tempfile

import numpy as np
import pytest

import tfnorm
from tests.conftest import run_python
from tests.testing import random_input
from tfnorm import _keras
from tfnorm._keras import keras, tf
from tfnorm.layers import is_norm_layer
from tfnorm.models import NORM_POSITIONS, SequencePooling

D_MODEL, HEADS, DFF = 16, 4, 32


def small_encoder(num_layers=2, **kwargs):
    kwargs.setdefault("dropout_rate", 0.0)
    return tfnorm.build_encoder(num_layers, D_MODEL, HEADS, DFF, **kwargs)


def small_classifier(num_classes=3, **kwargs):
    kwargs.setdefault("dropout_rate", 0.0)
    options = dict(num_layers=2, d_model=D_MODEL, num_heads=HEADS, dff=DFF)
    options.update(kwargs)
    return tfnorm.build_classifier(50, 8, num_classes, **options)


def token_ids(seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, 50, (4, 8)).astype("int32")
    ids[0, 5:] = 0
    ids[1, 2:] = 0
    ids[3, 7:] = 0
    return ids


def all_norms(model):
    found = []
    for layer in model.layers:
        if is_norm_layer(layer):
            found.append(layer)
        for name in (
            "attention_norm",
            "ffn_norm",
            "attention_output_norm",
            "ffn_output_norm",
        ):
            if getattr(layer, name, None) is not None:
                found.append(getattr(layer, name))
    return found


# -- encoder_layer ---------------------------------------------------------


@pytest.mark.parametrize("norm_position", NORM_POSITIONS)
def test_encoder_layer_maps_sequence_and_mask_to_same_shape(norm_position):
    extra = {"num_layers_total": 4} if norm_position == "deepnorm" else {}
    layer = tfnorm.encoder_layer(
        D_MODEL, HEADS, DFF, 0.0, norm_position=norm_position, **extra
    )
    assert layer.name == "encoder_layer"
    x = random_input((2, 5, D_MODEL))
    mask = np.ones((2, 5), "float32")
    mask[1, 3:] = 0
    y = np.asarray(layer([x, mask]))
    assert y.shape == (2, 5, D_MODEL)
    # The functional model is the block, with the mask passed through.
    block = layer.get_layer("block")
    np.testing.assert_allclose(
        y, np.asarray(block(x, padding_mask=mask)), rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize("builder", ["encoder_layer", "build_encoder"])
def test_one_tensor_means_every_position_is_real(builder):
    if builder == "encoder_layer":
        model = tfnorm.encoder_layer(D_MODEL, HEADS, DFF, 0.0)
    else:
        model = small_encoder(norm_position="post")
    assert isinstance(model, tfnorm.models.EncoderModel)
    assert [i.name for i in model.inputs] == ["sequence", "padding_mask"]
    x = random_input((2, 6, D_MODEL), seed=11)
    ones = np.ones((2, 6), "float32")
    y = np.asarray(model(x))
    np.testing.assert_array_equal(y, np.asarray(model([x, ones])))
    np.testing.assert_array_equal(y, np.asarray(model({"sequence": x})))
    # A real mask changes the result: the mask input is used, not ignored.
    mask = ones.copy()
    mask[0, 3:] = 0
    assert not np.allclose(np.asarray(model([x, mask]))[0], y[0], atol=1e-4)
    graph = tf.function(lambda t: model(t, training=False))
    np.testing.assert_allclose(np.asarray(graph(tf.constant(x))), y, atol=1e-6)


def test_issue_example_runs():
    assert tfnorm.build_encoder(2, 32, 4, 64)(tf.zeros((2, 8, 32))).shape == (2, 8, 32)


def test_implicit_mask_flows_through_the_one_tensor_form():
    ids = np.array([[3, 5, 7, 0, 0], [2, 9, 0, 0, 0]])
    keras.utils.set_random_seed(0)
    embedding = keras.layers.Embedding(20, D_MODEL, mask_zero=True)
    encoder = small_encoder(norm_position="pre")
    x = embedding(ids)
    y = encoder(x)
    np.testing.assert_array_equal(np.asarray(_keras.get_keras_mask(y)), ids != 0)
    # The same as passing the padding mask explicitly.
    explicit = np.asarray(encoder([tf.identity(x), tf.constant(ids != 0, tf.float32)]))
    np.testing.assert_allclose(np.asarray(y), explicit, rtol=1e-6, atol=1e-6)

    # In a functional model the mask reaches the pooling after the encoder:
    # what padded ids embed to changes nothing.
    inputs = keras.Input(shape=(None,), dtype="int32")
    pooled = keras.layers.GlobalAveragePooling1D()(encoder(embedding(inputs)))
    model = keras.Model(inputs, pooled)
    expected = np.asarray(model(ids))
    table = np.asarray(embedding.embeddings).copy()
    table[0] += np.linspace(-3.0, 3.0, D_MODEL)
    embedding.embeddings.assign(table)
    np.testing.assert_allclose(np.asarray(model(ids)), expected, rtol=1e-5, atol=1e-5)


def test_wrong_input_structures_are_clear_errors():
    x = random_input((1, 3, D_MODEL))
    with pytest.raises(ValueError, match="Received: 3 inputs"):
        small_encoder()([x, np.ones((1, 3), "float32"), x])
    with pytest.raises(ValueError, match=re.escape("Received: keys ['tokens']")):
        small_encoder()({"tokens": x})


def test_encoder_layer_without_mask_input_takes_one_tensor():
    layer = tfnorm.encoder_layer(D_MODEL, HEADS, DFF, with_padding_mask=False)
    assert len(layer.inputs) == 1
    assert layer(random_input((1, 3, D_MODEL))).shape == (1, 3, D_MODEL)


# -- build_encoder ---------------------------------------------------------


@pytest.mark.parametrize(
    "norm_position, has_final_norm",
    [("post", False), ("pre", True), ("sandwich", True), ("deepnorm", False)],
)
def test_encoder_names_and_automatic_final_norm(norm_position, has_final_norm):
    encoder = small_encoder(3, norm_position=norm_position)
    assert encoder.name == "encoder"
    names = [layer.name for layer in encoder.layers]
    assert [n for n in names if n.startswith("block_")] == [
        "block_0",
        "block_1",
        "block_2",
    ]
    assert ("final_norm" in names) == has_final_norm
    assert names[-1] == ("final_norm" if has_final_norm else "block_2")
    for index in range(3):
        block = encoder.get_layer(f"block_{index}")
        assert block.num_layers_total == 3
        assert block.attention_norm.name == "attention_norm"
        assert block.ffn_norm.name == "ffn_norm"


@pytest.mark.parametrize("norm_position, final_norm", [("pre", False), ("post", True)])
def test_final_norm_can_be_forced(norm_position, final_norm):
    encoder = small_encoder(norm_position=norm_position, final_norm=final_norm)
    names = [layer.name for layer in encoder.layers]
    assert ("final_norm" in names) == final_norm


def test_encoder_output_is_the_blocks_in_sequence():
    encoder = small_encoder(3, norm_position="pre", name="stack")
    assert encoder.name == "stack"
    x = random_input((2, 6, D_MODEL), seed=2)
    mask = np.ones((2, 6), "float32")
    mask[0, 4:] = 0
    h = x
    for index in range(3):
        h = encoder.get_layer(f"block_{index}")(h, padding_mask=mask)
    h = encoder.get_layer("final_norm")(h)
    np.testing.assert_allclose(
        np.asarray(encoder([x, mask])), np.asarray(h), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize(
    "epsilon, expected",
    [
        (1e-6, [1e-6, 1e-6, 1e-6]),
        ([1e-6, 1e-5, 1e-4], [1e-6, 1e-5, 1e-4]),
        (lambda i: 10.0 ** (i - 7), [1e-7, 1e-6, 1e-5]),
    ],
    ids=["float", "list", "callable"],
)
def test_layer_wise_epsilon(epsilon, expected):
    encoder = small_encoder(3, norm="rms", norm_position="sandwich", epsilon=epsilon)
    for index, value in enumerate(expected):
        block = encoder.get_layer(f"block_{index}")
        for name in block._norm_names():
            assert getattr(block, name).epsilon == pytest.approx(value)
    assert encoder.get_layer("final_norm").epsilon == pytest.approx(expected[-1])


def test_epsilon_none_keeps_the_norms_default():
    encoder = small_encoder(norm="rms")
    assert encoder.get_layer("block_0").ffn_norm.epsilon == tfnorm.RMSNorm().epsilon


@pytest.mark.parametrize("norm_position", NORM_POSITIONS)
def test_rms_choice_applies_to_every_norm_of_the_stack(norm_position):
    encoder = small_encoder(3, norm="rms", norm_position=norm_position)
    norms = all_norms(encoder)
    per_block = 4 if norm_position == "sandwich" else 2
    final = 1 if norm_position in ("pre", "sandwich") else 0
    assert len(norms) == 3 * per_block + final
    assert all(isinstance(n, tfnorm.RMSNorm) for n in norms)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: small_encoder(0), "num_layers=0"),
        (lambda: small_encoder(3, epsilon=[1e-5, 1e-5]), "(length 2)"),
        (lambda: small_encoder(norm_position="mid"), "'sandwich', 'deepnorm'"),
        (lambda: small_encoder(num_layers_total=4), "num_layers_total=4"),
        (lambda: tfnorm.build_encoder(2, 16, 0, 32), "num_heads=0"),
        (lambda: tfnorm.build_encoder(2, 16, 4, -1), "dff=-1"),
        (lambda: small_encoder(dropout_rate=1.0), "dropout_rate=1.0"),
        (lambda: small_classifier(pooling="max"), "pooling='max'"),
        (lambda: small_classifier(num_classes=0), "num_classes=0"),
    ],
)
def test_bad_builder_arguments_raise_clear_errors(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


# -- build_classifier ------------------------------------------------------


@pytest.mark.parametrize("norm_position", NORM_POSITIONS)
@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_classifier_returns_logits(norm_position, pooling):
    model = small_classifier(norm_position=norm_position, pooling=pooling)
    assert model.name == "classifier"
    assert tuple(model.input_shape) == (None, 8)
    logits = np.asarray(model(token_ids()))
    assert logits.shape == (4, 3)
    assert model.get_layer("logits").activation is keras.activations.linear
    # Logits, not probabilities: rows need not sum to one.
    assert not np.allclose(logits.sum(axis=1), 1.0, atol=1e-3)
    encoder = model.get_layer("encoder")
    assert encoder.get_layer("block_1").attention_norm.name == "attention_norm"


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_classifier_ignores_padding(pooling):
    model = small_classifier(pooling=pooling)
    ids = token_ids()
    expected = np.asarray(model(ids))
    # Changing what the padding id embeds to changes only padded positions;
    # the encoder's mask and the pooling must both ignore them.
    embedding = model.get_layer("embedding").token_embedding
    table = np.asarray(embedding.embeddings).copy()
    table[0] = 25.0
    embedding.embeddings.assign(table)
    np.testing.assert_allclose(np.asarray(model(ids)), expected, rtol=1e-5, atol=1e-5)
    # Sequences with no padding do see the change in a real token's row.
    # (Not a constant shift: every LayerNorm would cancel that.)
    table[ids[2, 0]] += np.linspace(-3.0, 3.0, D_MODEL)
    embedding.embeddings.assign(table)
    changed = np.asarray(model(ids))
    assert not np.allclose(changed[2], expected[2], atol=1e-4)


def test_mean_pooling_averages_real_positions_only():
    x = random_input((2, 4, 3), seed=3)
    mask = np.array([[1, 1, 0, 0], [0, 0, 0, 0]], "float32")
    pooled = np.asarray(SequencePooling("mean")([x, mask]))
    np.testing.assert_allclose(pooled[0], x[0, :2].mean(axis=0), rtol=1e-6)
    np.testing.assert_array_equal(pooled[1], np.zeros(3))
    cls = np.asarray(SequencePooling("cls")([x, mask]))
    np.testing.assert_array_equal(cls, x[:, 0])


# -- mixed precision and distribution -------------------------------------


def test_classifier_under_mixed_float16(mixed_policy):
    ids = token_ids()
    reference = small_classifier(norm_position="sandwich")
    expected = np.asarray(reference(ids))
    mixed_policy("mixed_float16")
    model = small_classifier(norm_position="sandwich")
    model.set_weights(reference.get_weights())
    logits = model(ids)
    assert logits.dtype == tf.float32
    block = model.get_layer("encoder").get_layer("block_0")
    assert block.compute_dtype == "float16"
    for name in block._norm_names():
        assert all(w.dtype == tf.float32 for w in getattr(block, name).weights)
    logits = np.asarray(logits)
    assert np.isfinite(logits).all()
    np.testing.assert_allclose(logits, expected, rtol=2e-2, atol=2e-2)


def test_classifier_fits_inside_mirrored_strategy(two_device_strategy):
    ids = np.tile(token_ids(), (2, 1))
    labels = np.arange(len(ids)) % 3
    with two_device_strategy.scope():
        model = small_classifier(norm_position="post")
        model.compile(
            optimizer=keras.optimizers.SGD(0.1),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=False,  # XLA compilation would dominate the test.
        )
    weights = model.get_weights()
    single = small_classifier(norm_position="post")
    single.set_weights(weights)
    np.testing.assert_allclose(
        np.asarray(model(ids)), np.asarray(single(ids)), rtol=1e-5, atol=1e-5
    )
    history = model.fit(ids, labels, batch_size=8, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert not np.allclose(np.asarray(model(ids)), np.asarray(single(ids)))


# -- saving ----------------------------------------------------------------


def _save_all_formats(model, inputs, workdir, sequence_alone=None):
    np.save(os.path.join(workdir, "expected.npy"), np.asarray(model(inputs)))
    if sequence_alone is not None:
        # The one-tensor call form must survive the round trip too.
        np.save(os.path.join(workdir, "sequence.npy"), sequence_alone)
        np.save(
            os.path.join(workdir, "expected_alone.npy"),
            np.asarray(model(sequence_alone)),
        )
    for index, value in enumerate(inputs if isinstance(inputs, list) else [inputs]):
        np.save(os.path.join(workdir, f"input_{index}.npy"), value)
    return [
        tfnorm.models.save_model(model, os.path.join(workdir, "model"), fmt)
        for fmt in _keras.SAVE_FORMATS
    ]


def test_save_model_writes_the_native_format_by_default(tmp_path):
    model = small_encoder(1)
    path = tfnorm.models.save_model(model, tmp_path / "encoder")
    native_suffix = {"keras": ".keras", "tf": ""}[_keras.NATIVE_FORMAT]
    assert path == str(tmp_path / "encoder") + native_suffix
    assert os.path.exists(path)
    with pytest.raises(ValueError, match="Received: save_format='onnx'"):
        tfnorm.models.save_model(model, tmp_path / "other", "onnx")


def test_encoders_and_classifier_save_and_reload_in_a_fresh_process():
    x = random_input((2, 5, D_MODEL), seed=4)
    mask = np.ones((2, 5), "float32")
    mask[1, 3:] = 0
    saved = []
    for position, norm in (("sandwich", "rms"), ("deepnorm", "layer")):
        workdir = tempfile.mkdtemp(prefix=f"tfnorm-encoder-{position}-")
        model = small_encoder(
            3, norm=norm, norm_position=position, epsilon=[1e-6, 1e-5, 1e-4]
        )
        paths = _save_all_formats(model, [x, mask], workdir, sequence_alone=x)
        saved.append((paths, workdir, 2))
    workdir = tempfile.mkdtemp(prefix="tfnorm-classifier-")
    model = small_classifier(norm_position="pre", pooling="cls", norm="scale")
    saved.append((_save_all_formats(model, token_ids(), workdir), workdir, 1))
    # An encoder called with one tensor inside another model, fed by an
    # implicit mask: the nested call and the mask survive reloading.
    workdir = tempfile.mkdtemp(prefix="tfnorm-nested-")
    ids = keras.Input(shape=(8,), dtype="int32")
    x = keras.layers.Embedding(50, D_MODEL, mask_zero=True)(ids)
    x = keras.layers.GlobalAveragePooling1D()(small_encoder(norm_position="post")(x))
    model = keras.Model(ids, keras.layers.Dense(3)(x))
    saved.append((_save_all_formats(model, token_ids(), workdir), workdir, 1))
    # One fresh process for all models: starting TensorFlow dominates.
    out = run_python(
        f"""
        import os
        import numpy as np, tensorflow as tf
        import tfnorm
        for paths, workdir, num_inputs in {saved!r}:
            inputs = [np.load(os.path.join(workdir, f"input_{{i}}.npy"))
                      for i in range(num_inputs)]
            expected = np.load(os.path.join(workdir, "expected.npy"))
            alone = os.path.join(workdir, "expected_alone.npy")
            for path in paths:
                model = tf.keras.models.load_model(path, compile=False)
                got = model(inputs if num_inputs > 1 else inputs[0])
                np.testing.assert_array_equal(np.asarray(got), expected)
                if os.path.exists(alone):
                    sequence = np.load(os.path.join(workdir, "sequence.npy"))
                    np.testing.assert_array_equal(
                        np.asarray(model(sequence)), np.load(alone))
                    print("one tensor", path)
                print("reloaded", path)
        """,
        # SavedModel loading is slow on a busy 2-core machine.
        timeout=900,
    )
    assert out.count("reloaded") == sum(len(paths) for paths, _, _ in saved), out
    assert out.count("one tensor") == sum(len(paths) for paths, _, _ in saved[:2]), out

"""Reading keras-hub's TransformerEncoder (tfnorm/models/encoder/keras_hub.py)
into tfnorm's blocks: `TransformerEncoderBlock.from_keras_hub` and
`tfnorm.models.encoder_from_keras_hub` give the same outputs."""

from __future__ import annotations

import numpy as np
import pytest

import tfnorm
import tfnorm.models
from tests.testing import import_keras_hub
from tfnorm._keras import keras

# -- keras-hub TransformerEncoder weights onto tfnorm's blocks -----------------

D_MODEL, SEQ = 16, 6


def _hub_encoder(normalize_first, seed=0, **options):
    """A built keras-hub TransformerEncoder with non-trivial weights."""
    keras_hub = import_keras_hub()
    options = {
        "intermediate_dim": 24,
        "num_heads": 4,
        "dropout": 0.1,
        "activation": "gelu",
        "layer_norm_epsilon": 1e-6,
        **options,
    }
    layer = keras_hub.layers.TransformerEncoder(
        normalize_first=normalize_first, **options
    )
    layer.build((None, None, D_MODEL))
    rng = np.random.default_rng(seed)
    layer.set_weights(
        [w + 0.1 * rng.standard_normal(w.shape) for w in layer.get_weights()]
    )
    return layer


def _hub_inputs():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, SEQ, D_MODEL)).astype("float32")
    padding_mask = np.array([[1] * SEQ, [1] * 4 + [0] * (SEQ - 4)], "int32")
    return x, padding_mask


@pytest.mark.parametrize("normalize_first", [False, True])
def test_keras_hub_encoder_becomes_a_block_with_the_same_outputs(normalize_first):
    hub = _hub_encoder(normalize_first)
    block = tfnorm.TransformerEncoderBlock.from_keras_hub(hub)
    config = block.get_config()
    assert config["norm_position"] == ("pre" if normalize_first else "post")
    assert (config["d_model"], config["num_heads"], config["dff"]) == (16, 4, 24)
    assert config["epsilon"] == 1e-6 and config["activation"] == "gelu"
    assert config["dropout_rate"] == config["attention_dropout"] == 0.1
    assert config["ffn_dropout"] == 0.0  # keras-hub has no dropout there
    x, padding_mask = _hub_inputs()
    np.testing.assert_allclose(
        np.asarray(block(x, training=False)),
        np.asarray(hub(x, training=False)),
        atol=1e-5,
    )
    # With a padding mask: real positions match (padded ones are meaningless).
    ours = np.asarray(block(x, padding_mask=padding_mask, training=False))
    theirs = np.asarray(hub(x, padding_mask=padding_mask, training=False))
    real = padding_mask.astype(bool)
    np.testing.assert_allclose(ours[real], theirs[real], atol=1e-5)
    # The mask changes the outputs, so it was applied on both sides.
    assert not np.allclose(ours[1, :4], np.asarray(block(x))[1, :4], atol=1e-4)


@pytest.mark.parametrize("normalize_first", [False, True])
def test_a_stack_of_keras_hub_encoders_becomes_a_build_encoder_model(
    normalize_first,
):
    stack = [
        _hub_encoder(normalize_first, seed=0),
        _hub_encoder(normalize_first, seed=1, layer_norm_epsilon=1e-5),
    ]
    x, padding_mask = _hub_inputs()
    expected = x
    for layer in stack:
        expected = layer(expected, padding_mask=padding_mask, training=False)
    expected = np.asarray(expected)

    encoder = tfnorm.models.encoder_from_keras_hub(stack)
    assert [layer.name for layer in encoder.layers[2:]] == ["block_0", "block_1"]
    assert encoder.get_layer("block_1").epsilon == 1e-5
    ours = np.asarray(encoder([x, padding_mask], training=False))
    real = padding_mask.astype(bool)
    np.testing.assert_allclose(ours[real], expected[real], atol=1e-5)

    # One training step after conversion: finite loss, every weight moves.
    import tensorflow as tf

    before = [np.array(v) for v in encoder.trainable_weights]
    optimizer = keras.optimizers.Adam(1e-3)
    with tf.GradientTape() as tape:
        y = encoder([x, padding_mask], training=True)
        loss = tf.reduce_mean(tf.square(y))
    grads = tape.gradient(loss, encoder.trainable_weights)
    optimizer.apply_gradients(zip(grads, encoder.trainable_weights))
    assert np.isfinite(float(loss))
    after = [np.array(v) for v in encoder.trainable_weights]
    assert all(not np.array_equal(a, b) for a, b in zip(before, after))


def test_a_converted_block_switches_to_rms_norm_and_pre_ln_for_fine_tuning():
    hub = _hub_encoder(normalize_first=False)
    block = tfnorm.TransformerEncoderBlock.from_keras_hub(hub)
    x, _ = _hub_inputs()
    # Same weights, other norm position: a config change.
    pre = tfnorm.TransformerEncoderBlock.from_config(
        dict(block.get_config(), norm_position="pre")
    )
    pre.build(x.shape)
    pre.set_weights(block.get_weights())
    assert pre.norm_position == "pre"
    assert not np.allclose(np.asarray(pre(x)), np.asarray(block(x)), atol=1e-3)
    # RMSNorm: the attention and FFN weights carry over, the norms' scale too.
    rms = tfnorm.TransformerEncoderBlock.from_config(
        dict(block.get_config(), norm="rms")
    )
    rms.build(x.shape)
    for name in ("attention", "ffn_inner", "ffn_output"):
        getattr(rms, name).set_weights(getattr(block, name).get_weights())
    for name in ("attention_norm", "ffn_norm"):
        norm = getattr(rms, name)
        assert isinstance(norm, tfnorm.RMSNorm) and norm.epsilon == 1e-6
        norm.gamma.assign(getattr(block, name).gamma)
    model = keras.Sequential([keras.Input((SEQ, D_MODEL)), rms])
    model.compile(optimizer="adam", loss="mse")
    history = model.fit(x, np.zeros_like(x), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def _double(t):  # an activation Keras has no name for
    return t * 2.0


@pytest.mark.parametrize(
    "options, match",
    [
        ({"num_heads": 3}, "num_heads=3"),
        ({"activation": _double}, "activation="),
    ],
)
def test_a_keras_hub_option_tfnorm_lacks_is_one_value_error(options, match):
    hub = _hub_encoder(normalize_first=False, **options)
    with pytest.raises(ValueError, match=match):
        tfnorm.TransformerEncoderBlock.from_keras_hub(hub)


def test_unbuilt_foreign_and_mismatched_encoders_are_named():
    keras_hub = import_keras_hub()
    with pytest.raises(ValueError, match="not built"):
        tfnorm.TransformerEncoderBlock.from_keras_hub(
            keras_hub.layers.TransformerEncoder(8, 2)
        )
    with pytest.raises(ValueError, match="Expected a keras_hub"):
        tfnorm.TransformerEncoderBlock.from_keras_hub(keras.layers.Dense(3))

    class WithOption(keras_hub.layers.TransformerEncoder):
        def __init__(self, *args, gated=True, **kwargs):
            super().__init__(*args, **kwargs)
            self.gated = gated

        def get_config(self):
            return dict(super().get_config(), gated=self.gated)

    layer = WithOption(8, 2)
    layer.build((None, None, D_MODEL))
    with pytest.raises(ValueError, match="gated=True"):
        tfnorm.TransformerEncoderBlock.from_keras_hub(layer)
    with pytest.raises(ValueError, match="normalize_first=False and "):
        tfnorm.models.encoder_from_keras_hub([_hub_encoder(False), _hub_encoder(True)])
    with pytest.raises(ValueError, match="layers=\\[\\]"):
        tfnorm.models.encoder_from_keras_hub([])

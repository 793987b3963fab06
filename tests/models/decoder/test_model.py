from __future__ import annotations

import os
import re

import numpy as np
import pytest

import tfnorm
from tests.testing import assert_model_reloads_in_fresh_process
from tfnorm._keras import keras, tf
from tfnorm.callbacks import find_norm_layers
from tfnorm.choices import NORM_POSITIONS

VOCAB, MAX_LEN = 37, 32


def make_model(preset="llama", **options):
    keras.utils.set_random_seed(0)
    return tfnorm.build_decoder(
        2, 16, 4, 32, vocab_size=VOCAB, max_len=MAX_LEN, preset=preset, **options
    )


def token_ids(shape, seed=0):
    return np.random.default_rng(seed).integers(1, VOCAB, shape).astype("int32")


def test_llama_preset():
    model = make_model("llama")
    names = [layer.name for layer in model.layers]
    assert "lm_head" in names and "position_embedding" not in names
    norms = dict(find_norm_layers(model))
    assert sorted(norms) == [
        "block_0/attention_norm",
        "block_0/ffn_norm",
        "block_1/attention_norm",
        "block_1/ffn_norm",
        "final_norm",
    ]
    assert all(isinstance(n, tfnorm.RMSNorm) for n in norms.values())
    assert all(n.epsilon == 1e-6 for n in norms.values())
    block = model.get_layer("block_0")
    assert block.rope_max_wavelength == 10000.0
    assert block.feed_forward == "swiglu" and not block.use_bias
    assert not any("bias" in w.name for w in model.weights)
    assert model(token_ids((2, 5))).shape == (2, 5, VOCAB)


def test_gpt2_preset_ties_the_head_to_the_token_embedding():
    model = make_model("gpt2")
    names = [layer.name for layer in model.layers]
    assert "lm_head" not in names and "position_embedding" in names
    norms = [n for _, n in find_norm_layers(model)]
    assert len(norms) == 5
    assert all(isinstance(n, tfnorm.LayerNormalization) for n in norms)
    assert all(n.epsilon == 1e-5 for n in norms)
    block = model.get_layer("block_0")
    assert block.rope_max_wavelength is None
    assert block.feed_forward == "gelu_tanh" and block.use_bias
    # Tied: the logits are the last hidden state times the embedding table.
    ids = token_ids((1, 4))
    table = np.asarray(model.get_layer("token_embedding").embeddings)
    hidden = keras.Model(model.inputs, model.get_layer("final_norm").output)
    expected = np.asarray(hidden([ids, np.ones_like(ids, "float32")])) @ table.T
    np.testing.assert_allclose(np.asarray(model(ids)), expected, rtol=1e-5, atol=1e-5)


def test_every_option_can_be_overridden():
    model = make_model(
        "gpt2",
        norm="rms",
        epsilon=1e-3,
        norm_position="post",
        num_kv_heads=2,
        position_embedding="rotary",
        tie_embeddings=False,
        use_bias=False,
        feed_forward="swiglu",
    )
    names = [layer.name for layer in model.layers]
    # Post-LN blocks end on a norm: no final norm by default.
    assert "final_norm" not in names and "lm_head" in names
    block = model.get_layer("block_1")
    assert block.norm_position == "post" and block.num_kv_heads == 2
    assert block.rope_max_wavelength == 10000.0
    assert isinstance(block.ffn_norm, tfnorm.RMSNorm) and block.ffn_norm.epsilon == 1e-3


@pytest.mark.parametrize("preset", ["llama", "gpt2"])
@pytest.mark.parametrize("norm", ["dyt", tfnorm.DynamicTanh, "rms", "layer", "scale"])
def test_every_norm_of_the_family_builds_with_a_preset(preset, norm):
    # The preset's epsilon goes to norms with a row statistic only.
    model = make_model(preset, norm=norm)
    assert model(token_ids((1, 4))).shape == (1, 4, VOCAB)
    block_norm = model.get_layer("block_0").attention_norm
    without_epsilon = norm in ("dyt", tfnorm.DynamicTanh)
    assert (getattr(block_norm, "epsilon", None) is None) == without_epsilon


def test_an_epsilon_given_for_a_norm_without_one_is_refused():
    with pytest.raises(ValueError, match="epsilon"):
        make_model("llama", norm="dyt", epsilon=1e-6)


@pytest.mark.parametrize("norm_position", NORM_POSITIONS)
@pytest.mark.parametrize("preset", ["llama", "gpt2"])
def test_changing_a_later_token_changes_no_earlier_logit(preset, norm_position):
    model = make_model(preset, norm_position=norm_position, dropout_rate=0.0)
    ids = token_ids((2, 7), seed=1)
    changed = ids.copy()
    changed[:, 5] = (changed[:, 5] + 3) % VOCAB
    y, y_changed = np.asarray(model(ids)), np.asarray(model(changed))
    np.testing.assert_allclose(y[:, :5], y_changed[:, :5], rtol=1e-5, atol=1e-5)
    assert not np.allclose(y[:, 5:], y_changed[:, 5:], atol=1e-4)


@pytest.mark.parametrize("preset", ["llama", "gpt2"])
def test_padded_tokens_change_no_logit_at_real_positions(preset):
    model = make_model(preset)
    ids = token_ids((2, 6), seed=2)
    mask = np.ones((2, 6), "float32")
    mask[0, :2] = 0  # left padding
    changed = ids.copy()
    changed[0, :2] = (changed[0, :2] + 7) % VOCAB
    real = mask == 1
    y = np.asarray(model([ids, mask]))
    np.testing.assert_allclose(
        np.asarray(model([changed, mask]))[real], y[real], rtol=1e-5, atol=1e-5
    )
    assert not np.allclose(np.asarray(model(changed))[real], y[real], atol=1e-4)
    # The ids alone mean "every position is real".
    np.testing.assert_array_equal(
        np.asarray(model(ids)), np.asarray(model([ids, np.ones_like(mask)]))
    )


@pytest.mark.parametrize("preset", ["llama", "gpt2"])
def test_cached_forward_equals_the_full_model(preset):
    model = make_model(preset, num_kv_heads=2)
    ids = token_ids((2, 6), seed=3)
    expected = np.asarray(model(ids))
    cache = model.init_cache(2, 8)
    first, cache = model.call_with_cache(ids[:, :4], cache, 0)
    second, cache = model.call_with_cache(ids[:, 4:5], cache, 4)
    third, _ = model.call_with_cache(ids[:, 5:], cache, 5)
    got = np.concatenate([np.asarray(first), np.asarray(second), np.asarray(third)], 1)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert model.vocab_size == VOCAB and model.max_len == MAX_LEN


@pytest.mark.parametrize("jit_compile", [False, True])
def test_a_training_step_lowers_the_loss(jit_compile):
    model = make_model("llama")
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    ids = token_ids((8, 9), seed=4)
    inputs, targets = ids[:, :-1], ids[:, 1:]
    history = model.fit(inputs, targets, epochs=5, batch_size=8, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_gives_float32_logits(policy, mixed_policy):
    reference = make_model("gpt2")
    ids = token_ids((2, 5), seed=5)
    expected = np.asarray(reference(ids))
    mixed_policy(policy)
    model = make_model("gpt2")
    model.set_weights(reference.get_weights())
    logits = model(ids)
    assert logits.dtype == tf.float32
    norms = [n for _, n in find_norm_layers(model)]
    assert all(w.dtype == tf.float32 for n in norms for w in n.weights)
    tolerance = 2e-2 if policy == "mixed_float16" else 1e-1
    np.testing.assert_allclose(np.asarray(logits), expected, atol=tolerance)
    cached, _ = model.call_with_cache(ids, model.init_cache(2, 5), 0)
    np.testing.assert_allclose(np.asarray(cached), expected, atol=tolerance)


@pytest.mark.parametrize("preset", ["llama", "gpt2"])
def test_save_and_reload_with_only_import_tfnorm(preset):
    model = make_model(preset, num_kv_heads=2)
    ids = token_ids((2, 5), seed=6)
    assert_model_reloads_in_fresh_process(
        model,
        {
            "ids": ids,
            "expected": np.asarray(model(ids)),
            "greedy": tfnorm.generate(model, ids, 3),
        },
        f"""
        assert type(model).__name__ == "DecoderModel", type(model)
        assert model.max_len == {MAX_LEN}, model.max_len
        np.testing.assert_allclose(np.asarray(model(ids)), expected, atol=1e-6)
        np.testing.assert_array_equal(tfnorm.generate(model, ids, 3), greedy)
        """,
    )


def test_callbacks_find_the_decoders_norms(tmp_path):
    model = make_model("llama", norm_position="sandwich")
    paths = [path for path, _ in find_norm_layers(model)]
    assert len(paths) == 2 * 4 + 1
    assert "block_1/ffn_output_norm" in paths
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    ids = token_ids((4, 9), seed=7)
    data = (ids[:, :-1], ids[:, 1:])
    callbacks = [
        tfnorm.callbacks.NormHistogramCallback(
            str(tmp_path / "hist"), data[0], every_n_steps=1
        ),
        tfnorm.callbacks.NormHealthMonitor(data[0], every_n_steps=1),
        tfnorm.callbacks.GradientNormCallback(
            str(tmp_path / "grad"), data, every_n_steps=1
        ),
    ]
    model.fit(*data, epochs=1, batch_size=4, verbose=0, callbacks=callbacks)
    assert os.listdir(tmp_path / "hist") and os.listdir(tmp_path / "grad")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"preset": "gpt3"}, "preset='gpt3'"),
        ({"position_embedding": "sinusoidal"}, "position_embedding='sinusoidal'"),
        ({"tie_embeddings": 1}, "tie_embeddings=1"),
        ({"layer_norm_epsilon": 1e-5}, "layer_norm_epsilon=1e-05"),
        ({"vocab_size": 0}, "vocab_size=0"),
        ({"max_len": -1}, "max_len=-1"),
        ({"norm_position": "mid"}, "norm_position='mid'"),
    ],
)
def test_bad_options_raise_clear_errors(kwargs, message):
    args = {"vocab_size": VOCAB, "max_len": MAX_LEN, **kwargs}
    with pytest.raises(ValueError, match=re.escape(message)):
        tfnorm.build_decoder(2, 16, 4, 32, **args)

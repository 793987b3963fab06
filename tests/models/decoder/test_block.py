from __future__ import annotations

import re

import numpy as np
import pytest

import tfnorm
from tests.conftest import RUNTIME
from tests.testing import assert_reloads_in_fresh_process, random_input
from tfnorm._keras import keras, tf
from tfnorm.callbacks import find_norm_layers
from tfnorm.choices import NORM_NAMES, NORM_POSITIONS
from tfnorm.models.decoder.options import FEED_FORWARDS

D_MODEL, HEADS, DFF = 16, 4, 32


def make_block(norm_position="pre", **kwargs):
    if norm_position == "deepnorm":
        kwargs.setdefault("num_layers_total", 4)
    return tfnorm.TransformerDecoderBlock(
        D_MODEL, HEADS, DFF, norm_position=norm_position, **kwargs
    )


def randomize(block, seed=3):
    """Every weight random (norm scales around 1), so a misplaced op shows."""
    rng = np.random.default_rng(seed)
    values = []
    for weight, value in zip(block.weights, block.get_weights()):
        noise = 0.3 * rng.standard_normal(value.shape)
        is_norm_scale = "norm" in weight.name and value.ndim == 1
        values.append(((1.0 if is_norm_scale else 0.0) + noise).astype(value.dtype))
    block.set_weights(values)


def built(block, length=6, seed=3):
    block(random_input((2, length, D_MODEL)))
    randomize(block, seed)
    return block


def cached_outputs(block, x, chunks):
    """The block run through its cache on consecutive chunks of `x`."""
    cache = block.init_cache(x.shape[0], x.shape[1] + 2)
    outputs, start = [], 0
    for size in chunks:
        out, cache = block.call_with_cache(x[:, start : start + size], cache, start)
        outputs.append(np.asarray(out))
        start += size
    return np.concatenate(outputs, axis=1)


VARIANTS = [
    pytest.param({}, id="llama_like"),
    pytest.param(
        {
            "norm": "layer",
            "feed_forward": "gelu_tanh",
            "use_bias": True,
            "rope_max_wavelength": None,
        },
        id="gpt2_like",
    ),
    pytest.param({"num_kv_heads": 2}, id="gqa"),
    pytest.param({"num_kv_heads": 1, "feed_forward": "relu"}, id="mqa_relu"),
]


@pytest.mark.parametrize("norm_position", NORM_POSITIONS)
@pytest.mark.parametrize("options", VARIANTS)
def test_changing_a_later_token_changes_no_earlier_output(norm_position, options):
    block = built(make_block(norm_position, **options))
    x = random_input((2, 6, D_MODEL), seed=1)
    changed = x.copy()
    changed[:, 4] += 3.0
    y, y_changed = np.asarray(block(x)), np.asarray(block(changed))
    np.testing.assert_allclose(y[:, :4], y_changed[:, :4], rtol=1e-5, atol=1e-5)
    assert not np.allclose(y[:, 4:], y_changed[:, 4:], atol=1e-3)


@pytest.mark.parametrize("norm_position", NORM_POSITIONS)
def test_padding_positions_do_not_affect_real_tokens(norm_position):
    block = built(make_block(norm_position, num_kv_heads=2))
    x = random_input((2, 6, D_MODEL), seed=4)
    mask = np.ones((2, 6), "float32")
    mask[0, :2] = 0  # left padding
    mask[1, 3] = 0  # a hole
    changed = x.copy()
    changed[mask == 0] = 10 * random_input((int((mask == 0).sum()), D_MODEL), seed=5)
    real = mask == 1
    y = np.asarray(block(x, padding_mask=mask))
    y_changed = np.asarray(block(changed, padding_mask=mask))
    np.testing.assert_allclose(y[real], y_changed[real], rtol=1e-5, atol=1e-5)
    # Without the mask the padded vectors leak into later positions.
    assert not np.allclose(np.asarray(block(changed))[real], y[real], atol=1e-3)


@pytest.mark.parametrize("norm_position", NORM_POSITIONS)
@pytest.mark.parametrize("options", VARIANTS)
def test_cached_call_equals_the_full_call(norm_position, options):
    block = built(make_block(norm_position, **options))
    x = random_input((2, 6, D_MODEL), seed=2)
    expected = np.asarray(block(x))
    for chunks in ((6,), (1,) * 6, (3, 1, 2)):
        np.testing.assert_allclose(
            cached_outputs(block, x, chunks), expected, rtol=1e-5, atol=1e-5
        )


def test_cached_call_honours_a_padding_mask():
    block = built(make_block())
    x = random_input((1, 4, D_MODEL), seed=6)
    mask = np.array([[0, 1, 1, 1, 1, 1]], "float32")  # over the cache length
    expected = np.asarray(block(x, padding_mask=mask[:, :4]))
    cache = block.init_cache(1, 6)
    out, _ = block.call_with_cache(x, cache, 0, padding_mask=mask)
    np.testing.assert_allclose(
        np.asarray(out)[:, 1:], expected[:, 1:], rtol=1e-5, atol=1e-5
    )


def _rope(x, positions, wavelength):
    half = x.shape[-1] // 2
    freq = wavelength ** (-np.arange(half) * 2.0 / x.shape[-1])
    angle = positions[:, None] * freq
    cos, sin = np.cos(angle)[:, None], np.sin(angle)[:, None]
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], -1)


def _rms(x, scale, epsilon):
    return x / np.sqrt(np.mean(x**2, -1, keepdims=True) + epsilon) * scale


def reference_pre_ln_block(block, x):
    """Multi-head attention written out in NumPy from the block's weights
    (Pre-LN, RMSNorm, RoPE, SwiGLU, no biases; KV head j // g for query head j)."""
    w = {
        (getattr(v, "path", None) or v.name).split("/")[-2]: np.asarray(v, np.float64)
        for v in block.weights
    }
    eps = block.attention_norm.epsilon
    t = x.shape[1]
    positions = np.arange(t, dtype=np.float64)
    h = _rms(x, w["attention_norm"], eps)
    q = _rope(np.einsum("btd,dnh->btnh", h, w["query"]), positions, 10000.0)
    k = _rope(np.einsum("btd,dnh->btnh", h, w["key"]), positions, 10000.0)
    v = np.einsum("btd,dnh->btnh", h, w["value"])
    groups = block.num_heads // block.num_kv_heads
    k, v = np.repeat(k, groups, axis=2), np.repeat(v, groups, axis=2)
    scores = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(block.head_dim)
    scores = np.where(np.tril(np.ones((t, t), bool)), scores, -np.inf)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    heads = np.einsum("bnts,bsnh->btnh", probs, v)
    x = x + np.einsum("btnh,nhd->btd", heads, w["attention_output"])
    h = _rms(x, w["ffn_norm"], eps)
    gate = h @ w["ffn_gate"]
    hidden = gate / (1 + np.exp(-gate)) * (h @ w["ffn_inner"])
    return x + hidden @ w["ffn_output"]


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
def test_attention_matches_a_numpy_multi_head_reference(num_kv_heads):
    block = built(make_block(num_kv_heads=num_kv_heads), seed=7)
    x = random_input((2, 5, D_MODEL), seed=8)
    np.testing.assert_allclose(
        np.asarray(block(x)),
        reference_pre_ln_block(block, x.astype(np.float64)),
        rtol=1e-4,
        atol=1e-4,
    )


def test_grouped_query_attention_equals_mha_with_repeated_key_value_heads():
    gqa = built(make_block(num_kv_heads=2), seed=9)
    mha = make_block()
    x = random_input((2, 5, D_MODEL), seed=10)
    mha(x)
    weights = []
    for variable, value in zip(gqa.weights, gqa.get_weights()):
        name = (getattr(variable, "path", None) or variable.name).split("/")[-2]
        if name in ("key", "value"):
            value = np.repeat(value, HEADS // 2, axis=1)  # (d, kv, h) -> (d, n, h)
        weights.append(value)
    mha.set_weights(weights)
    np.testing.assert_allclose(
        np.asarray(gqa(x)), np.asarray(mha(x)), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("norm", NORM_NAMES)
@pytest.mark.parametrize("norm_position", NORM_POSITIONS)
def test_every_norm_of_the_family_at_every_position(norm, norm_position):
    epsilon = None if norm == "dyt" else 1e-4
    block = make_block(norm_position, norm=norm, epsilon=epsilon)
    block.build((None, None, D_MODEL))
    norms = [layer for _, layer in find_norm_layers(block)]
    assert len(norms) == (4 if norm_position == "sandwich" else 2)
    assert all(type(n) is type(tfnorm.get_norm(norm)) for n in norms)
    if epsilon is not None:
        assert all(n.epsilon == epsilon for n in norms)
    randomize(block)
    x = random_input((1, 4, D_MODEL), seed=11)
    np.testing.assert_allclose(
        cached_outputs(block, x, (2, 1, 1)), np.asarray(block(x)), atol=1e-5
    )


def test_deepnorm_scales_value_output_and_ffn_kernels_by_beta():
    depth = 6
    beta = (8 * depth) ** -0.25
    blocks = {}
    for position in ("post", "deepnorm"):
        blocks[position] = tfnorm.TransformerDecoderBlock(
            64, 4, 256, norm_position=position, num_layers_total=depth
        )
        blocks[position].build((None, 8, 64))
    assert blocks["deepnorm"].residual_scale == pytest.approx((2 * depth) ** 0.25)
    for name, gain in (("query", 1.0), ("key", 1.0), ("value", beta)):
        ratio = np.std(getattr(blocks["deepnorm"], name).kernel) / np.std(
            getattr(blocks["post"], name).kernel
        )
        assert ratio == pytest.approx(gain, rel=0.1), name
    for name in ("attention_output", "ffn_gate", "ffn_inner", "ffn_output"):
        ratio = np.std(getattr(blocks["deepnorm"], name).kernel) / np.std(
            getattr(blocks["post"], name).kernel
        )
        assert ratio == pytest.approx(beta, rel=0.1), name


def test_kernels_are_drawn_as_the_matrices_they_stand_for():
    # Glorot over the real fans in every runtime: Keras 2 alone would count
    # a (256, 8, 32) kernel's fans as a convolution's.
    block = tfnorm.TransformerDecoderBlock(256, 8, 512, num_kv_heads=2)
    block.build((None, 8, 256))
    fans = {
        "query": (256, 256),
        "key": (256, 64),
        "value": (256, 64),
        "attention_output": (256, 256),
        "ffn_gate": (256, 512),
        "ffn_inner": (256, 512),
        "ffn_output": (512, 256),
    }
    for name, (fan_in, fan_out) in fans.items():
        std = float(np.std(getattr(block, name).kernel))
        assert std == pytest.approx((2.0 / (fan_in + fan_out)) ** 0.5, rel=0.05), name


def test_weights_have_keras_hub_layouts():
    block = tfnorm.TransformerDecoderBlock(
        16, 4, 32, num_kv_heads=2, use_bias=True, feed_forward="swiglu"
    )
    block.build((None, None, 16))
    assert tuple(block.query.kernel.shape) == (16, 4, 4)
    assert tuple(block.key.kernel.shape) == (16, 2, 4)
    assert tuple(block.value.kernel.shape) == (16, 2, 4)
    assert tuple(block.attention_output.kernel.shape) == (4, 4, 16)
    assert tuple(block.ffn_gate.kernel.shape) == (16, 32)
    # Two RMSNorm scales, four projections and three Dense layers with biases.
    assert len(block.trainable_weights) == 2 + 4 * 2 + 3 * 2


def test_dropout_active_only_in_training():
    block = built(make_block(dropout_rate=0.5))
    x = random_input((2, 6, D_MODEL), seed=12)
    inference = np.asarray(block(x, training=False))
    np.testing.assert_array_equal(np.asarray(block(x)), inference)
    assert not np.allclose(np.asarray(block(x, training=True)), inference)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_graph_and_xla_give_the_eager_result(jit_compile):
    block = built(make_block(num_kv_heads=2))
    x = random_input((2, 6, D_MODEL), seed=13)
    expected = np.asarray(block(x))
    full = tf.function(lambda t: block(t), jit_compile=jit_compile)
    np.testing.assert_allclose(np.asarray(full(x)), expected, atol=1e-5)

    def step(t, cache, index):
        return block.call_with_cache(t, cache, index)

    cached = tf.function(step, jit_compile=jit_compile)
    cache = block.init_cache(2, 8)
    outputs = []
    for index in range(6):
        out, cache = cached(x[:, index : index + 1], cache, tf.constant(index))
        outputs.append(np.asarray(out))
    np.testing.assert_allclose(np.concatenate(outputs, 1), expected, atol=1e-5)
    assert cached.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_keeps_weights_and_norm_statistics_in_float32(
    policy, mixed_policy
):
    x = random_input((2, 6, D_MODEL), seed=14)
    reference = built(make_block("sandwich"))
    expected = np.asarray(reference(x))
    mixed_policy(policy)
    block = make_block("sandwich")
    y = block(x)
    assert y.dtype == tf.as_dtype(policy.split("_")[1])
    assert all(w.dtype == tf.float32 for w in block.weights)
    block.set_weights(reference.get_weights())
    tolerance = 3e-2 if policy == "mixed_float16" else 2e-1
    out = np.asarray(tf.cast(block(x), tf.float32))
    np.testing.assert_allclose(out, expected, rtol=tolerance, atol=tolerance)
    cached = block.call_with_cache(x, block.init_cache(2, 6), 0)[0]
    assert cached.dtype == y.dtype
    np.testing.assert_allclose(
        np.asarray(tf.cast(cached, tf.float32)), expected, atol=tolerance
    )


def test_config_round_trip_and_registration():
    block = built(
        make_block(
            "sandwich",
            norm="layer",
            epsilon=1e-4,
            num_kv_heads=2,
            feed_forward="gelu",
            use_bias=True,
            rope_max_wavelength=500.0,
            attention_dropout=0.2,
        )
    )
    x = random_input((2, 4, D_MODEL), seed=15)
    config = block.get_config()
    clone = tfnorm.TransformerDecoderBlock.from_config(config)
    assert clone.get_config() == config
    clone.build(x.shape)
    clone.set_weights(block.get_weights())
    np.testing.assert_array_equal(np.asarray(clone(x)), np.asarray(block(x)))
    revived = keras.layers.deserialize(keras.layers.serialize(block))
    assert isinstance(revived, tfnorm.TransformerDecoderBlock)


def test_save_and_reload_in_a_fresh_process():
    block = built(make_block(num_kv_heads=2, norm="layer", use_bias=True))
    assert_reloads_in_fresh_process(
        block, (2, 5, D_MODEL), random_input((2, 5, D_MODEL), seed=16)
    )


def test_decoder_layer_is_one_block_as_a_functional_model():
    layer = tfnorm.decoder_layer(D_MODEL, HEADS, DFF, norm="layer")
    # The family-neutral model class, not the encoder's.
    assert type(layer) is tfnorm.models.MaskedSequenceModel
    x = random_input((2, 5, D_MODEL), seed=17)
    assert layer(x).shape == (2, 5, D_MODEL)
    block = layer.get_layer("block")
    assert isinstance(block, tfnorm.TransformerDecoderBlock)
    mask = np.array([[1] * 5, [0, 0, 1, 1, 1]], "float32")
    np.testing.assert_allclose(
        np.asarray(layer([x, mask])), np.asarray(block(x, padding_mask=mask)), atol=1e-6
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_heads": 3}, "d_model=16, num_heads=3"),
        ({"num_kv_heads": 3}, "num_heads=4, num_kv_heads=3"),
        ({"num_kv_heads": 0}, "num_kv_heads=0"),
        ({"feed_forward": "glu"}, "feed_forward='glu'"),
        ({"use_bias": "yes"}, "use_bias='yes'"),
        ({"rope_max_wavelength": 0}, "rope_max_wavelength=0"),
        ({"d_model": 12, "num_heads": 4}, "d_model=12, num_heads=4"),
        ({"dropout_rate": 1.0}, "dropout_rate=1.0"),
        ({"attention_dropout": -0.1}, "attention_dropout=-0.1"),
        ({"norm_position": "middle"}, "norm_position='middle'"),
        ({"norm_position": "deepnorm"}, "num_layers_total=None"),
        ({"norm": "batch"}, "Unknown norm 'batch'"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, message):
    args = {"d_model": D_MODEL, "num_heads": HEADS, "dff": DFF}
    args.update(kwargs)
    with pytest.raises(ValueError, match=re.escape(message)):
        tfnorm.TransformerDecoderBlock(**args)


def test_input_width_must_equal_d_model():
    with pytest.raises(ValueError, match="d_model=16"):
        make_block()(random_input((1, 3, 8)))


def test_feed_forward_choices_are_distinct():
    x = random_input((1, 4, D_MODEL), seed=18)
    outputs = []
    for kind in FEED_FORWARDS:
        keras.utils.set_random_seed(0)
        block = make_block(feed_forward=kind, kernel_initializer="he_normal")
        outputs.append(np.asarray(block(x)))
    for i in range(len(outputs)):
        for j in range(i + 1, len(outputs)):
            assert not np.allclose(outputs[i], outputs[j], atol=1e-4)
    assert RUNTIME in ("keras3", "legacy", "tf29")

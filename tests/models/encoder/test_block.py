from __future__ import annotations

import numpy as np
import pytest

import tfnorm
from tests.conftest import RUNTIME
from tests.testing import random_input
from tfnorm import _keras
from tfnorm._keras import keras, tf
from tfnorm.callbacks import find_norm_layers
from tfnorm.models import NORM_POSITIONS

D_MODEL, HEADS, DFF = 16, 4, 32


def make_block(norm_position="pre", **kwargs):
    kwargs.setdefault("dropout_rate", 0.0)
    if norm_position == "deepnorm":
        kwargs.setdefault("num_layers_total", 6)
    return tfnorm.TransformerEncoderBlock(
        D_MODEL, HEADS, DFF, norm_position=norm_position, **kwargs
    )


def randomize_norms(block, seed=3):
    """γ ≠ 1 and β ≠ 0, so a norm applied in the wrong place changes outputs."""
    rng = np.random.default_rng(seed)
    for name in (
        "attention_norm",
        "ffn_norm",
        "attention_output_norm",
        "ffn_output_norm",
    ):
        norm = getattr(block, name, None)
        if norm is None:
            continue
        norm.set_weights(
            [
                (1.0 + 0.5 * rng.standard_normal(w.shape)).astype("float32")
                for w in norm.get_weights()
            ]
        )


def by_hand(block, x):
    """The block's formula, written out from its own sublayers (dropout off)."""
    x = tf.constant(x)

    def attention(h):
        return block.attention(h, h, training=False)

    def ffn(h):
        return block.ffn_output(block.ffn_inner(h))

    position = block.norm_position
    for branch, norm, norm_out in (
        (
            attention,
            block.attention_norm,
            getattr(block, "attention_output_norm", None),
        ),
        (ffn, block.ffn_norm, getattr(block, "ffn_output_norm", None)),
    ):
        if position == "post":
            x = norm(x + branch(x))
        elif position == "pre":
            x = x + branch(norm(x))
        elif position == "sandwich":
            x = x + norm_out(branch(norm(x)))
        else:
            alpha = (2.0 * block.num_layers_total) ** 0.25
            x = norm(alpha * x + branch(x))
    return np.asarray(x)


@pytest.mark.parametrize("norm_position", NORM_POSITIONS)
def test_output_equals_formula_from_sublayers(norm_position):
    block = make_block(norm_position)
    x = random_input((2, 6, D_MODEL), seed=1)
    block(x)
    randomize_norms(block)
    np.testing.assert_allclose(
        np.asarray(block(x, training=False)), by_hand(block, x), rtol=1e-5, atol=1e-5
    )


def _kernels(block):
    """Each kernel of the block as the (inputs, outputs) matrix it stands for."""
    kernels = {}
    for weight in block.attention.weights:
        path = getattr(weight, "path", None) or weight.name
        for projection in ("query", "key", "value", "attention_output"):
            if f"/{projection}/kernel" in path:
                kernels[projection] = np.asarray(weight).reshape(
                    block.d_model, block.d_model
                )
    kernels["ffn_inner"] = np.asarray(block.ffn_inner.kernel)
    kernels["ffn_output"] = np.asarray(block.ffn_output.kernel)
    return kernels


def _kernel_stds(block):
    """Std of each projection kernel: query, key, value, attention output, FFN."""
    return {name: float(np.std(k)) for name, k in _kernels(block).items()}


def test_deepnorm_alpha_and_beta_follow_depth():
    depth = 6
    beta = (8 * depth) ** -0.25
    blocks = {}
    for position in ("post", "deepnorm"):
        blocks[position] = tfnorm.TransformerEncoderBlock(
            64, 4, 256, norm_position=position, num_layers_total=depth
        )
        blocks[position].build((None, 8, 64))
    assert blocks["deepnorm"].residual_scale == pytest.approx((2 * depth) ** 0.25)
    assert blocks["post"].residual_scale == 1.0
    post, deep = _kernel_stds(blocks["post"]), _kernel_stds(blocks["deepnorm"])
    assert len(post) == 6
    # Query and key keep gain 1; value, attention output and both FFN
    # kernels start scaled by β (std estimates from >= 16k draws: ±3%).
    for name, gain in (
        ("query", 1.0),
        ("key", 1.0),
        ("value", beta),
        ("attention_output", beta),
        ("ffn_inner", beta),
        ("ffn_output", beta),
    ):
        assert deep[name] / post[name] == pytest.approx(gain, rel=0.08), name


# Fans of each kernel as the matrix it stands for: every attention
# projection maps d_model features to num_heads * key_dim = d_model.
_WIDE = dict(d_model=256, num_heads=8, dff=512)
_DEEPNORM_SCALED = ("value", "attention_output", "ffn_inner", "ffn_output")


def _fans(name, d_model, dff):
    return {"ffn_inner": (d_model, dff), "ffn_output": (dff, d_model)}.get(
        name, (d_model, d_model)
    )


@pytest.mark.parametrize(
    "initializer, expected_std",
    [
        ("glorot_uniform", lambda fan_in, fan_out: (2.0 / (fan_in + fan_out)) ** 0.5),
        ("he_normal", lambda fan_in, fan_out: (2.0 / fan_in) ** 0.5),
        ({"class_name": "RandomNormal", "config": {"stddev": 0.02}}, lambda *_: 0.02),
    ],
    ids=["glorot_uniform", "he_normal", "random_normal"],
)
@pytest.mark.parametrize("norm_position", ["pre", "deepnorm"])
def test_every_kernel_std_matches_its_theoretical_value(
    norm_position, initializer, expected_std
):
    # Same expected values in every runtime: Keras 2 alone would give the
    # 3-D attention kernels glorot std 0.039 instead of 0.125 at width 64.
    depth = 6
    block = tfnorm.TransformerEncoderBlock(
        **_WIDE,
        norm_position=norm_position,
        num_layers_total=depth,
        kernel_initializer=initializer,
    )
    block.build((None, 8, _WIDE["d_model"]))
    stds = _kernel_stds(block)
    assert len(stds) == 6
    beta = (8 * depth) ** -0.25
    for name, std in stds.items():
        expected = expected_std(*_fans(name, _WIDE["d_model"], _WIDE["dff"]))
        if norm_position == "deepnorm" and name in _DEEPNORM_SCALED:
            expected *= beta
        # >= 65k draws per kernel: the std's sampling error is below 0.5%.
        assert std == pytest.approx(expected, rel=0.05), (name, std, expected)


def test_orthogonal_initializer_gives_orthogonal_projection_matrices():
    # Keras 2 on its own would orthogonalise a (d_model * heads, key_dim)
    # flattening of the query kernel, not the d_model x d_model projection.
    block = tfnorm.TransformerEncoderBlock(64, 4, 128, kernel_initializer="orthogonal")
    block.build((None, 8, 64))
    for name, kernel in _kernels(block).items():
        rows, cols = kernel.shape
        gram = kernel.T @ kernel if rows >= cols else kernel @ kernel.T
        np.testing.assert_allclose(
            gram, np.eye(min(rows, cols)), atol=1e-5, err_msg=name
        )


def _seeded_block_kernels(seed):
    # dff = d_model: all six kernels are 64 x 64 and can be compared.
    block = tfnorm.TransformerEncoderBlock(
        64, 4, 64, kernel_initializer=keras.initializers.GlorotUniform(seed=seed)
    )
    block.build((None, 8, 64))
    return _kernels(block)


@pytest.mark.parametrize("seed", [0, 7])
def test_seeded_initializer_gives_every_kernel_its_own_values(seed):
    kernels = _seeded_block_kernels(seed)
    assert len(kernels) == 6
    names = sorted(kernels)
    for i, first in enumerate(names):
        assert np.std(kernels[first]) == pytest.approx((2.0 / 128) ** 0.5, rel=0.05)
        for second in names[i + 1 :]:
            assert not np.allclose(kernels[first], kernels[second]), (first, second)


@pytest.mark.skipif(
    RUNTIME == "tf29",
    reason="Keras 2.9's seeded initializers draw new values on every eager "
    "call (stateful random ops), so a seed does not reproduce weights there",
)
def test_seeded_initializer_reproduces_the_block():
    first, second = _seeded_block_kernels(3), _seeded_block_kernels(3)
    for name in first:
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)


@pytest.mark.parametrize("norm_position", NORM_POSITIONS)
def test_shape_preserved_for_static_and_unknown_lengths(norm_position):
    block = make_block(norm_position)
    assert block(random_input((2, 5, D_MODEL))).shape == (2, 5, D_MODEL)
    inputs = keras.Input(shape=(None, D_MODEL))
    model = keras.Model(inputs, block(inputs))
    assert tuple(model.output_shape) == (None, None, D_MODEL)
    for length in (3, 9):
        assert model(random_input((1, length, D_MODEL))).shape == (1, length, D_MODEL)
    graph = tf.function(
        lambda x: block(x),
        input_signature=[tf.TensorSpec((None, None, D_MODEL), tf.float32)],
    )
    assert graph(random_input((2, 7, D_MODEL))).shape == (2, 7, D_MODEL)


def test_key_dim_is_d_model_over_heads():
    block = tfnorm.TransformerEncoderBlock(32, 8, 64)
    block.build((None, None, 32))
    assert block.key_dim == 4
    # Q, K, V kernels (32, 8, 4) + biases (8, 4), output kernel (8, 4, 32) + bias.
    expected_attention = 3 * (32 * 8 * 4 + 8 * 4) + (8 * 4 * 32 + 32)
    assert block.attention.count_params() == expected_attention
    expected_ffn = (32 * 64 + 64) + (64 * 32 + 32)
    expected_norms = 2 * (2 * 32)
    assert block.count_params() == expected_attention + expected_ffn + expected_norms


@pytest.mark.parametrize("norm_position", NORM_POSITIONS)
def test_rms_choice_applies_to_every_norm(norm_position):
    block = make_block(norm_position, norm="rms", epsilon=1e-4)
    block.build((None, None, D_MODEL))
    norms = [layer for _, layer in find_norm_layers(block)]
    expected = 4 if norm_position == "sandwich" else 2
    assert len(norms) == expected
    assert all(isinstance(n, tfnorm.RMSNorm) for n in norms)
    assert all(n.epsilon == 1e-4 for n in norms)


def test_sublayer_names():
    block = make_block("sandwich")
    block.build((None, None, D_MODEL))
    names = {
        block.attention.name,
        block.attention_dropout_layer.name,
        block.ffn_inner.name,
        block.ffn_dropout_layer.name,
        block.ffn_output.name,
        block.output_dropout.name,
        block.attention_norm.name,
        block.ffn_norm.name,
        block.attention_output_norm.name,
        block.ffn_output_norm.name,
    }
    assert names == {
        "attention",
        "attention_dropout",
        "ffn_inner",
        "ffn_dropout",
        "ffn_output",
        "output_dropout",
        "attention_norm",
        "ffn_norm",
        "attention_output_norm",
        "ffn_output_norm",
    }


@pytest.mark.parametrize("norm_position", NORM_POSITIONS)
def test_padding_positions_do_not_affect_real_tokens(norm_position):
    block = make_block(norm_position)
    x = random_input((2, 6, D_MODEL), seed=4)
    mask = np.ones((2, 6), "float32")
    mask[0, 4:] = 0
    mask[1, 2:] = 0
    changed = x.copy()
    changed[mask == 0] = random_input((int((mask == 0).sum()), D_MODEL), seed=5) * 10
    y = np.asarray(block(x, padding_mask=mask))
    y_changed = np.asarray(block(changed, padding_mask=mask))
    real = mask == 1
    np.testing.assert_allclose(y[real], y_changed[real], rtol=1e-5, atol=1e-5)
    # Without the mask the padded vectors do leak in: the check has teeth.
    assert not np.allclose(np.asarray(block(changed))[real], y[real], atol=1e-3)


def test_implicit_keras_mask_is_used_and_passed_on():
    ids = np.array([[3, 5, 7, 0, 0], [2, 9, 0, 0, 0]])
    keras.utils.set_random_seed(0)
    embedding = keras.layers.Embedding(20, D_MODEL, mask_zero=True)
    first, second = make_block("post"), make_block("pre")
    x = embedding(ids)
    hidden = first(x)
    np.testing.assert_array_equal(np.asarray(_keras.get_keras_mask(hidden)), ids != 0)
    y = np.asarray(second(hidden))
    # The caller's tensors keep their masks, so calling again gives the same.
    assert _keras.get_keras_mask(x) is not None
    np.testing.assert_array_equal(np.asarray(second(first(x))), y)

    # Padded vectors replaced (ids unchanged, so the implicit mask is too):
    # real positions keep their outputs through both blocks.
    changed = x + tf.constant((ids == 0)[..., None] * 5.0, tf.float32)
    changed._keras_mask = _keras.get_keras_mask(x)
    y_changed = np.asarray(second(first(changed)))
    real = ids != 0
    np.testing.assert_allclose(y[real], y_changed[real], rtol=1e-5, atol=1e-5)

    # Inside a functional model the mask flows Embedding → block → block.
    inputs = keras.Input(shape=(None,), dtype="int32")
    model = keras.Model(inputs, second(first(embedding(inputs))))
    np.testing.assert_allclose(np.asarray(model(ids)), y, rtol=1e-5, atol=1e-5)


def test_attention_mask_combines_with_padding_mask():
    block = make_block("pre")
    x = random_input((1, 5, D_MODEL), seed=6)
    causal = np.tril(np.ones((5, 5), "float32"))[None]
    y = np.asarray(block(x, attention_mask=causal))
    changed = x.copy()
    changed[:, 3:] += 3.0
    y_changed = np.asarray(block(changed, attention_mask=causal))
    # Causal: positions before the change do not see it.
    np.testing.assert_allclose(y[:, :3], y_changed[:, :3], rtol=1e-5, atol=1e-5)
    # Causal AND padding: position 2 must not see position 1 either.
    padding = np.array([[1, 0, 1, 1, 1]], "float32")
    changed = x.copy()
    changed[:, 1] += 3.0
    a = np.asarray(block(x, padding_mask=padding, attention_mask=causal))
    b = np.asarray(block(changed, padding_mask=padding, attention_mask=causal))
    np.testing.assert_allclose(a[:, 2:], b[:, 2:], rtol=1e-5, atol=1e-5)


def test_dropout_active_only_in_training():
    block = make_block("pre", dropout_rate=0.5)
    x = random_input((2, 6, D_MODEL), seed=7)
    inference = np.asarray(block(x, training=False))
    np.testing.assert_array_equal(np.asarray(block(x, training=False)), inference)
    assert not np.allclose(np.asarray(block(x, training=True)), inference)


@pytest.mark.parametrize("norm_position", NORM_POSITIONS)
def test_config_round_trip(norm_position):
    block = make_block(
        norm_position,
        norm="rms",
        epsilon=1e-4,
        activation="relu",
        attention_dropout=0.2,
        ffn_dropout=0.3,
        dropout_rate=0.1,
    )
    x = random_input((2, 4, D_MODEL), seed=8)
    y = np.asarray(block(x))
    config = block.get_config()
    clone = tfnorm.TransformerEncoderBlock.from_config(config)
    assert clone.get_config() == config
    clone.build(x.shape)
    clone.set_weights(block.get_weights())
    np.testing.assert_array_equal(np.asarray(clone(x)), y)
    # The registered name lets Keras deserialise it without custom_objects.
    revived = keras.layers.deserialize(keras.layers.serialize(block))
    assert isinstance(revived, tfnorm.TransformerEncoderBlock)


def test_norm_instance_and_config_specs_are_serialisable():
    template = tfnorm.RMSNorm(epsilon=1e-3)
    block = make_block("sandwich", norm=template)
    block.build((None, None, D_MODEL))
    clone = tfnorm.TransformerEncoderBlock.from_config(block.get_config())
    clone.build((None, None, D_MODEL))
    assert isinstance(clone.ffn_output_norm, tfnorm.RMSNorm)
    assert clone.ffn_output_norm.epsilon == 1e-3
    assert clone.ffn_output_norm is not block.ffn_output_norm


def test_mixed_float16_keeps_norms_in_float32(mixed_policy):
    x = random_input((2, 6, D_MODEL), seed=9)
    reference = make_block("sandwich")
    expected = np.asarray(reference(x))
    mixed_policy("mixed_float16")
    block = make_block("sandwich")
    y = block(x)
    assert y.dtype == tf.float16
    block.set_weights(reference.get_weights())
    norms = [n for _, n in find_norm_layers(block)]
    assert all(w.dtype == tf.float32 for n in norms for w in n.weights)
    out = np.asarray(tf.cast(block(x), tf.float32))
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, expected, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_heads": 0}, "num_heads=0"),
        ({"num_heads": -2}, "num_heads=-2"),
        ({"dff": 0}, "dff=0"),
        ({"num_heads": 3}, "d_model=16, num_heads=3"),
        ({"dropout_rate": 1.0}, "dropout_rate=1.0"),
        ({"dropout_rate": -0.1}, "dropout_rate=-0.1"),
        ({"attention_dropout": 1.5}, "attention_dropout=1.5"),
        ({"ffn_dropout": -1}, "ffn_dropout=-1"),
        ({"norm_position": "middle"}, "'post', 'pre', 'sandwich', 'deepnorm'"),
        ({"norm_position": "deepnorm"}, "num_layers_total=None"),
        ({"norm": "batch"}, "Unknown norm 'batch'"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, message):
    args = {"d_model": D_MODEL, "num_heads": HEADS, "dff": DFF}
    args.update(kwargs)
    with pytest.raises(ValueError, match=_escaped(message)):
        tfnorm.TransformerEncoderBlock(**args)


def _escaped(text):
    import re

    return re.escape(text)


@pytest.mark.parametrize(
    "make_norm",
    [
        lambda: keras.layers.Dropout(0.1),
        lambda: keras.layers.Dropout,
        lambda: keras.layers.serialize(keras.layers.Dropout(0.1)),
    ],
    ids=["instance", "class", "config_dict"],
)
def test_a_norm_that_is_not_a_normalisation_layer_is_rejected(make_norm):
    # A Dropout "norm" would train a Transformer with no normalisation.
    with pytest.raises(ValueError, match=r"`norm` must describe a normalisation"):
        tfnorm.TransformerEncoderBlock(D_MODEL, HEADS, DFF, norm=make_norm())
    with pytest.raises(ValueError, match=r"Dropout is not one\. Received: norm="):
        tfnorm.build_encoder(2, D_MODEL, HEADS, DFF, norm=make_norm())


@pytest.mark.parametrize("epsilon", [1e-46, 1e39])
@pytest.mark.parametrize("norm", ["layer", "rms", "scale"])
def test_an_epsilon_float32_cannot_hold_is_rejected_at_construction(norm, epsilon):
    with pytest.raises(ValueError, match=_escaped(f"Received: epsilon={epsilon!r}")):
        tfnorm.TransformerEncoderBlock(D_MODEL, HEADS, DFF, norm=norm, epsilon=epsilon)


def test_input_width_must_equal_d_model():
    with pytest.raises(ValueError, match="d_model=16"):
        make_block()(random_input((1, 3, 8)))

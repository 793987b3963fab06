"""The claims' controls of `tfnorm compare`, `tfnorm.experiments.controls`:
`gamma_init` and `input_offset`, and the experiment-only control norms."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import tfnorm
from tfnorm import _keras
from tfnorm._keras import keras, tf
from tfnorm.callbacks.layers import find_norm_layers
from tfnorm.choices import NORMS
from tfnorm.cli.main import main
from tfnorm.experiments import compare_experiment as warmup
from tfnorm.experiments import controls
from tfnorm.experiments.compare_runs import build_model
from tfnorm.experiments.compare_settings import CompareConfig
from tfnorm.experiments.controls import offset_inputs, scale_norm_gammas
from tfnorm.models import build_encoder

TINY = {
    "num_layers": 2,
    "d_model": 8,
    "num_heads": 2,
    "dff": 16,
    "vocab_size": 5,
    "seq_len": 4,
    "batch_size": 4,
    "steps": 6,
    "warmup_steps": 1,
    "seeds": (0,),
    "eval_size": 8,
    "eval_every": 3,
    "histogram_every": 0,
    "jit_compile": False,
    "variant_settings": [("post", 0)],
}


@pytest.mark.parametrize("norm", ["layer", "rms", "dyt"])
def test_gamma_init_scales_every_norms_gamma(norm):
    model, _ = build_model(2, 8, 2, 16, 5, 4, norm=norm, norm_position="pre")
    changed = scale_norm_gammas(model, 1.25)
    norms = find_norm_layers(model)
    assert changed == len(norms) == 5  # two per block and the final norm
    for _, layer in norms:
        np.testing.assert_allclose(layer.gamma.numpy(), np.full(8, 1.25))


def test_gamma_init_scales_scalenorms_g_from_its_sqrt_d_start():
    model, _ = build_model(1, 8, 2, 16, 5, 4, norm="scale", norm_position="post")
    assert scale_norm_gammas(model, 1.25) == 2
    for _, layer in find_norm_layers(model):
        assert float(layer.g.numpy()) == pytest.approx(1.25 * math.sqrt(8))


def test_gamma_init_scales_the_batch_norm_controls_gamma_once():
    model, _ = build_model(
        1, 8, 2, 16, 5, 4, norm=controls.MaskedBatchNorm, norm_position="pre"
    )
    assert scale_norm_gammas(model, 1.25) == 3  # two in the block, the final norm
    wrapped = [layer.batch_norm for _, layer in find_norm_layers(model)
               if isinstance(layer, controls.MaskedBatchNorm)]  # fmt: skip
    assert len(wrapped) == 3
    for batch_norm in wrapped:
        np.testing.assert_allclose(batch_norm.gamma.numpy(), np.full(8, 1.25))


def test_input_offset_adds_one_constant_to_every_feature():
    inputs = keras.Input((3, 4))
    model = keras.Model(inputs, offset_inputs(inputs, 10.0))
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype("float32")
    np.testing.assert_allclose(model(x).numpy(), x + 10.0, rtol=1e-6)
    assert model.layers[-1].name == "input_offset"


def test_the_offset_sits_between_the_embeddings_and_the_encoder():
    model, encoder = build_model(1, 8, 2, 16, 5, 4, input_offset=10.0)
    probe = keras.Model(
        model.input,
        [model.get_layer("embedding").output, model.get_layer("input_offset").output],
    )
    embedded, offset = probe(np.array([[0, 1, 2, 3]], "int32"))
    np.testing.assert_allclose(offset.numpy(), embedded.numpy() + 10.0, rtol=1e-6)
    names = [layer.name for layer in model.layers]
    assert names.index("input_offset") == names.index(encoder.name) - 1
    plain, _ = build_model(1, 8, 2, 16, 5, 4)
    assert "input_offset" not in [layer.name for layer in plain.layers]


def test_the_settings_reach_the_trained_model(tmp_path):
    plain = warmup.run_comparison(
        str(tmp_path / "plain"), log=lambda line: None, **TINY
    )
    scaled = warmup.run_comparison(
        str(tmp_path / "gamma"), log=lambda line: None, gamma_init=1.25, **TINY
    )
    offset = warmup.run_comparison(
        str(tmp_path / "offset"), log=lambda line: None, input_offset=10.0, **TINY
    )
    first = [run["losses"][0] for run in plain["runs"]]
    assert [run["losses"][0] for run in scaled["runs"]] != pytest.approx(first)
    assert [run["losses"][0] for run in offset["runs"]] != pytest.approx(first)
    assert scaled["config"]["gamma_init"] == 1.25
    assert offset["config"]["input_offset"] == 10.0


def test_defaults_leave_the_model_as_it_was():
    config = CompareConfig().resolve()
    assert (config.gamma_init, config.input_offset) == (1.0, 0.0)


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--gamma-init", "0", "--gamma-init: `gamma_init` must be a finite number"),
        ("--gamma-init", "-1.25", "Received: gamma_init=-1.25"),
        ("--gamma-init", "nan", "Received: gamma_init=nan"),
        ("--input-offset", "1e9", "--input-offset: `input_offset` must be"),
        ("--input-offset", "ten", "Received: input_offset='ten'"),
        ("--task", "lm", None),
    ],
)
def test_bad_values_are_one_line_naming_the_setting(
    tmp_path, capsys, flag, value, message
):
    output_dir = str(tmp_path / "out")
    given = [flag, value]
    if message is None:  # the decoder task has no embeddings offset
        given += ["--input-offset", "10"]
        message = "--input-offset: `input_offset` is added to the encoder tasks'"
    assert main(["compare", "--output-dir", output_dir] + given) == 2
    err = capsys.readouterr().err
    assert err.startswith("tfnorm compare: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.slow
def test_claim_gamma_init_figures_at_a_small_deep_post_ln_size(tmp_path):
    # docs/claims.md, claim 4, small: gamma 1.0 and 1.25 in a deep Post-LN
    # stack give finite figures (the verdict is the table's).
    sizes = {"num_layers": 8, "steps": 60, "seeds": (0,), "eval_size": 64}
    for gamma in (1.0, 1.25):
        result = warmup.run_comparison(
            str(tmp_path / str(gamma)),
            log=lambda line: None,
            variant_settings=[("post", 10)],
            gamma_init=gamma,
            histogram_every=0,
            **sizes,
        )
        (row,) = result["table"]
        assert np.isfinite(row["final_eval_loss_mean"])
        assert 0.0 <= row["final_accuracy_mean"] <= 1.0


@pytest.mark.slow
def test_claim_input_offset_figures_for_layernorm_and_rmsnorm(tmp_path):
    # docs/claims.md, claim 6, small: both norms with and without an offset.
    for norm in ("layer", "rms"):
        for offset in (0.0, 10.0):
            result = warmup.run_comparison(
                str(tmp_path / f"{norm}{offset}"),
                log=lambda line: None,
                variant_settings=[("pre", 0)],
                norm=norm,
                input_offset=offset,
                num_layers=4,
                steps=60,
                seeds=(0,),
                eval_size=64,
                histogram_every=0,
            )
            (row,) = result["table"]
            assert np.isfinite(row["final_eval_loss_mean"])


ROWS = np.random.default_rng(0).normal(2.0, 3.0, (4, 6, 8)).astype("float32")


def test_compute_dtype_layer_norm_equals_layer_norm_in_float32():
    control = controls.ComputeDtypeLayerNorm(epsilon=1e-5)
    reference = tfnorm.LayerNormalization(epsilon=1e-5)
    np.testing.assert_allclose(control(ROWS), reference(ROWS), atol=1e-5)


def test_in_float16_an_epsilon_of_1e8_gives_nan_on_a_constant_row_only_without_float32_statistics(
    mixed_policy,
):
    mixed_policy("mixed_float16")
    rows = np.concatenate([ROWS[0], np.zeros((1, 8), "float32")]).astype("float16")
    control = controls.ComputeDtypeLayerNorm(epsilon=1e-8)
    ours = tfnorm.LayerNormalization(epsilon=1e-8)
    half = control(rows).numpy()
    assert half.dtype == np.float16
    # 1e-8 rounds to 0 in float16: the zero row is 0 * rsqrt(0) = NaN.
    assert np.isnan(half[-1]).all() and np.isfinite(half[:-1]).all()
    assert np.isfinite(ours(rows).numpy()).all()
    # A larger epsilon survives the rounding.
    assert np.isfinite(controls.ComputeDtypeLayerNorm(epsilon=1e-5)(rows)).all()


def test_in_float16_large_inputs_overflow_the_variance_only_without_float32_statistics(
    mixed_policy,
):
    mixed_policy("mixed_float16")
    rows = (ROWS[0] * 500.0).astype("float16")  # squares above 65504
    # The variance overflows to Inf, and x * rsqrt(Inf) is silently 0.
    np.testing.assert_array_equal(controls.ComputeDtypeLayerNorm()(rows), 0.0)
    expected = tfnorm.LayerNormalization()(rows.astype("float32"))
    np.testing.assert_allclose(
        tfnorm.LayerNormalization()(rows), expected, atol=1e-2, rtol=1e-2
    )


def _input_gradient(norm, rows, upstream, jit_compile):
    def gradient(x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = norm(x)
        return tape.gradient(y, x, output_gradients=dy)

    return tf.function(gradient, jit_compile=jit_compile)(rows, upstream).numpy()


def _small_variance_rows():
    # Rows of variance about 1e-6: token embeddings drawn from N(0, 1e-3),
    # row 3's inputs.
    return (np.random.default_rng(0).normal(0, 1e-3, (4, 32))).astype("float16")


def _upstream(rows, size=1.0):
    # Not all ones: the gradient of a row's sum through a LayerNorm is 0.
    normal = np.random.default_rng(1).normal(size=rows.shape) * size
    return normal.astype("float16")


@pytest.mark.parametrize("jit_compile", [False, True])
def test_in_float16_a_small_epsilon_overflows_the_backward_on_near_constant_rows(
    mixed_policy, jit_compile
):
    # Claim 3's failure: the derivative of rsqrt(v + eps) is
    # -1/2 (v + eps)^(-3/2): rsqrt's value cubed, which passes float16's
    # 65504 once v + eps < 6.2e-4. On rows of variance ~1e-6 an epsilon of
    # 1e-5 overflows, 1e-3 does not, and tfnorm's float32 statistics never do.
    mixed_policy("mixed_float16")
    rows = _small_variance_rows()
    upstream = _upstream(rows)
    for epsilon, finite in ((1e-8, False), (1e-5, False), (1e-3, True)):
        control = controls.ComputeDtypeLayerNorm(epsilon=epsilon)
        gradient = _input_gradient(control, rows, upstream, jit_compile)
        assert np.isfinite(gradient).all() == finite, epsilon
    ours = tfnorm.LayerNormalization(epsilon=1e-8)
    assert np.isfinite(_input_gradient(ours, rows, upstream, jit_compile)).all()


def test_in_float16_xla_overflows_whatever_the_loss_scale_and_tensorflow_not(
    mixed_policy,
):
    # Why row 3's float16 runs fail differently by compile path.
    # TensorFlow's kernel multiplies the upstream gradient into the cube
    # step by step, so a small enough loss scale keeps it finite (the no-XLA
    # runs trained on after their first ~25 steps were skipped); XLA forms
    # the cube first, which is Inf below v + eps = 6.2e-4 whatever the
    # scale (every step skipped, the scale halved to 0). An upstream
    # gradient that underflowed to 0 gives 0 in TensorFlow (that row
    # silently learns nothing) and inf * 0 = NaN under XLA.
    mixed_policy("mixed_float16")
    rows = _small_variance_rows()
    control = controls.ComputeDtypeLayerNorm(epsilon=1e-4)
    small = _upstream(rows, 2.0**-9)
    assert np.isfinite(_input_gradient(control, rows, small, False)).all()
    assert not np.isfinite(_input_gradient(control, rows, small, True)).all()
    zero = np.zeros_like(rows)
    control = controls.ComputeDtypeLayerNorm(epsilon=1e-5)
    np.testing.assert_array_equal(_input_gradient(control, rows, zero, False), 0.0)
    assert np.isnan(_input_gradient(control, rows, zero, True)).any()


def test_compute_precision_sets_the_policy_for_the_block_only():
    with controls.compute_precision("float16"):
        assert _keras.global_policy_name() == "mixed_float16"
        assert keras.layers.Dense(2).compute_dtype == "float16"
    assert _keras.global_policy_name() == "float32"


def test_masked_batch_norm_uses_batch_statistics_in_training_and_moving_ones_after():
    layer = controls.MaskedBatchNorm(epsilon=1e-5, momentum=0.0)
    trained = layer(ROWS, training=True).numpy()
    flat = ROWS.reshape(-1, 8)
    expected = (flat - flat.mean(0)) / np.sqrt(flat.var(0) + 1e-5)
    np.testing.assert_allclose(trained.reshape(-1, 8), expected, atol=1e-4)
    # momentum 0: the moving averages are this batch's statistics now.
    np.testing.assert_allclose(layer(ROWS, training=False), trained, atol=1e-3)
    # One row alone, at inference, is normalised by those averages.
    single = layer(ROWS[:1], training=False).numpy()
    np.testing.assert_allclose(single, trained[:1], atol=1e-3)


def test_masked_batch_norm_leaves_masked_positions_out_where_keras_can():
    mask = np.ones((4, 6), "float32")
    mask[:, 4:] = 0.0
    padded = ROWS.copy()
    padded[:, 4:] = 1000.0  # padding values that would dominate the statistics
    layer = controls.MaskedBatchNorm(epsilon=1e-5)
    outputs = layer(padded, training=True, mask=mask).numpy()
    real = ROWS[:, :4].reshape(-1, 8)
    expected = (real - real.mean(0)) / np.sqrt(real.var(0) + 1e-5)
    close = np.allclose(outputs[:, :4].reshape(-1, 8), expected, atol=1e-3)
    # Keras 2.9's BatchNormalization takes no mask: the padding counts.
    assert close == _keras.BATCH_NORM_TAKES_MASK


def test_an_encoder_hands_its_padding_mask_to_the_batch_norm_control():
    encoder = build_encoder(
        1,
        8,
        2,
        16,
        dropout_rate=0.0,
        norm=controls.MaskedBatchNorm,
        norm_position="pre",
    )
    mask = np.ones((4, 6), "float32")
    mask[:, 3:] = 0.0
    padded = ROWS.copy()
    first = encoder([padded, mask], training=True).numpy()
    padded[:, 3:] = 500.0  # only the padding changes
    second = encoder([padded, mask], training=True).numpy()
    same = np.allclose(first[:, :3], second[:, :3], atol=1e-4)
    assert same == _keras.BATCH_NORM_TAKES_MASK


def test_the_family_and_the_norm_spec_leave_the_controls_out():
    assert "batch" not in NORMS
    with pytest.raises(ValueError, match="Unknown norm 'batch'"):
        tfnorm.get_norm("batch")
    assert controls.norm_spec("batch") is controls.MaskedBatchNorm
    assert controls.norm_spec("layer", "compute") is controls.ComputeDtypeLayerNorm
    assert controls.norm_spec("rms") == "rms"
    assert controls.norm_spec("layer") == "layer"


def test_tfnorm_train_still_refuses_the_batch_norm(tmp_path, capsys):
    logdir = tmp_path / "run"
    argv = ["train", "--task", "sorted", "--logdir", str(logdir), "--norm", "batch"]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Unknown norm 'batch'" in error
    assert not logdir.exists()


def test_the_controls_are_found_by_the_health_monitor():
    from tfnorm.callbacks.layers import find_norm_layers

    inputs = keras.Input((6, 8))
    x = controls.MaskedBatchNorm(name="bn")(inputs)
    x = controls.ComputeDtypeLayerNorm(name="ln16")(x)
    model = keras.Model(inputs, x)
    assert [path for path, _ in find_norm_layers(model)] == ["bn", "ln16"]
    statistic = model.get_layer("bn").row_statistic(tf.constant(ROWS))
    np.testing.assert_allclose(statistic, ROWS.var(-1), rtol=1e-4)


def test_the_position_offset_runs_from_minus_to_plus_the_amplitude():
    layer = controls.PositionOffset(3.0)
    x = np.random.default_rng(0).standard_normal((2, 4, 5)).astype("float32")
    ramp = np.array([-3.0, -1.0, 1.0, 3.0], "float32")[None, :, None]
    np.testing.assert_allclose(layer(x).numpy(), x + ramp, rtol=1e-6, atol=1e-6)
    assert controls.PositionOffset.from_config(layer.get_config()).amplitude == 3.0


def test_the_position_offset_is_the_only_position_signal():
    model, _ = build_model(1, 8, 2, 16, 5, 4, position_offset=2.0)
    names = [layer.name for layer in model.layers]
    assert "position_offset" in names
    assert not [w for w in model.weights if "position" in w.name]
    probe = keras.Model(model.input, model.get_layer("position_offset").output)
    # The same token at every position: rows differ by the offset alone.
    rows = probe(np.array([[3, 3, 3, 3]], "int32")).numpy()[0]
    differences = rows - rows[0]
    np.testing.assert_allclose(differences, np.repeat([[0.0], [4 / 3], [8 / 3], [4.0]], 8, axis=1), rtol=1e-5, atol=1e-5)  # fmt: skip


@pytest.mark.parametrize("std", [1.0, 1e-4])
def test_the_embeddings_are_drawn_with_the_given_spread(std):
    model, _ = build_model(1, 64, 2, 16, 50, 32, embedding_std=std)
    tables = model.get_layer("embedding").get_weights()
    assert len(tables) == 2  # tokens and positions
    for table in tables:
        assert np.std(table) == pytest.approx(std, rel=0.1)


def test_the_layered_epsilon_gives_the_deep_half_its_own():
    assert controls.layered_epsilon(1e-5, None, 4) == 1e-5
    assert controls.layered_epsilon(1e-7, 1e-5, 4) == [1e-7, 1e-7, 1e-5, 1e-5]
    assert controls.layered_epsilon(1e-7, 1e-5, 3) == [1e-7, 1e-5, 1e-5]


# One sequence of 4 positions whose last two are padding (value 100): the
# statistics over the real positions alone are mean 1, over all of them 50.5.
PADDED = np.array([[[0.0], [2.0], [100.0], [100.0]]], "float32")
PADDING_MASK = np.array([[1.0, 1.0, 0.0, 0.0]], "float32")


@pytest.mark.parametrize("count_padding", [False, True])
def test_the_batch_norm_counts_the_padding_when_asked_and_where_keras_cannot_mask(
    count_padding,
):
    # Momentum 0: the moving mean is the last batch's mean.
    norm = controls.MaskedBatchNorm(momentum=0.0, count_padding=count_padding)
    norm(PADDED, training=True, mask=PADDING_MASK)
    masked = _keras.BATCH_NORM_TAKES_MASK and not count_padding
    expected = 1.0 if masked else 50.5
    assert float(norm.batch_norm.moving_mean.numpy()[0]) == pytest.approx(expected)
    again = controls.MaskedBatchNorm.from_config(norm.get_config())
    assert again.count_padding == count_padding and again.momentum == 0.0


def test_the_batch_norm_spec_carries_its_momentum_and_padding():
    assert controls.norm_spec("batch") is controls.MaskedBatchNorm
    spec = controls.norm_spec("batch", momentum=0.9, padding="counted")
    assert isinstance(spec, controls.MaskedBatchNorm)
    assert (spec.momentum, spec.count_padding) == (0.9, True)
    masked = controls.norm_spec("batch", padding="masked")
    assert masked is controls.MaskedBatchNorm


@pytest.mark.slow
def test_claim_dc_component_position_offset_row_command(tmp_path):
    # docs/claims.md, second round, row 6 at a tiny size: the per-position
    # offset as the only position signal (the row runs it for LayerNorm and
    # RMSNorm; the norm is a flag, tested above).
    output_dir = str(tmp_path / "rms")
    flags = ["--num-layers", "2", "--d-model", "8", "--num-heads", "2"]
    flags += ["--dff", "16", "--steps", "6", "--eval-every", "3", "--no-jit"]
    flags += ["--eval-size", "16", "--histogram-every", "0", "--seeds", "0"]
    flags += ["--variants", "pre", "--norm", "rms", "--position-offset", "2"]
    assert main(["compare", "--output-dir", output_dir, *flags]) == 0
    with open(f"{output_dir}/results.json") as handle:
        result = json.load(handle)
    assert result["config"]["position_offset"] == 2.0
    assert np.isfinite(result["table"][0]["final_eval_loss_mean"])

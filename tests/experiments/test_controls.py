"""The experiment-only control norms of `tfnorm compare`, `tfnorm.experiments.controls`."""

from __future__ import annotations

import numpy as np
import pytest

import tfnorm
from tfnorm import _keras
from tfnorm._keras import keras, tf
from tfnorm.choices import NORMS
from tfnorm.cli.main import main
from tfnorm.experiments import controls
from tfnorm.models import build_encoder

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

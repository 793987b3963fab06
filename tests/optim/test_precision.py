"""Tests for the mixed-precision switch in `tfnorm.optim.precision`."""

from __future__ import annotations

import numpy as np
import pytest

import tfnorm
from tfnorm import _keras
from tfnorm._keras import keras, tf
from tfnorm.optim import (
    make_optimizer,
    set_mixed_precision,
    wrap_for_mixed_precision,
)
from tfnorm.optim.precision import needs_loss_scaling


@pytest.mark.parametrize(
    "mode, policy",
    [
        (None, "float32"),
        ("float32", "float32"),
        ("float16", "mixed_float16"),
        ("bfloat16", "mixed_bfloat16"),
        ("mixed_float16", "mixed_float16"),
    ],
)
def test_sets_the_global_policy(mode, policy):
    assert set_mixed_precision(mode) == policy
    assert _keras.global_policy_name() == policy
    layer = keras.layers.Dense(2)
    layer.build((None, 3))
    expected_compute = {"float32": "float32", "mixed_float16": "float16"}.get(
        policy, "bfloat16"
    )
    assert layer.compute_dtype == expected_compute
    assert layer.dtype == "float32"


def test_unknown_mode_names_the_value():
    with pytest.raises(ValueError, match="mode='fp16'"):
        set_mixed_precision("fp16")
    assert _keras.global_policy_name() == "float32"


def test_only_float16_wraps_the_optimizer_in_loss_scaling():
    for mode, wrapped in [("float32", False), ("bfloat16", False), ("float16", True)]:
        set_mixed_precision(mode)
        optimizer = make_optimizer(learning_rate=1e-3)
        result = wrap_for_mixed_precision(optimizer)
        assert (result is not optimizer) == wrapped, mode
        assert needs_loss_scaling() == wrapped
        if wrapped:
            assert result.inner_optimizer is optimizer
            assert wrap_for_mixed_precision(result) is result


def test_explicit_mode_overrides_the_global_policy():
    optimizer = make_optimizer(learning_rate=1e-3)
    assert wrap_for_mixed_precision(optimizer, mode="float16") is not optimizer
    assert wrap_for_mixed_precision(optimizer, mode="bfloat16") is optimizer


@pytest.mark.parametrize("mode", ["float16", "bfloat16"])
def test_a_mixed_encoder_trains_with_the_wrapped_adamw(mode):
    set_mixed_precision(mode)
    inputs = keras.Input((8, 16))
    encoder = tfnorm.build_encoder(
        1, 16, 2, 32, norm_position="post", dropout_rate=0.0, with_padding_mask=False
    )
    outputs = keras.layers.Dense(1, dtype="float32")(
        keras.layers.GlobalAveragePooling1D()(encoder(inputs))
    )
    model = keras.Model(inputs, outputs)
    optimizer = wrap_for_mixed_precision(
        make_optimizer(learning_rate=3e-3, model=model)
    )
    model.compile(optimizer=optimizer, loss="mse")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 8, 16)).astype("float32")
    y = x.mean(axis=(1, 2), keepdims=False)[:, None] * 10
    history = model.fit(x, y, epochs=8, batch_size=16, verbose=0)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses))
    assert losses[-1] < 0.7 * losses[0]
    assert all(v.dtype == tf.float32 for v in model.trainable_variables)

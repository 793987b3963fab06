"""NormHealthMonitor: overflow, NaN loss and collapsing variance are reported."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tfnorm
from tests.callbacks import models
from tfnorm._keras import keras
from tfnorm.callbacks import NormHealthError, NormHealthMonitor, NormHealthWarning


def _overflow_model():
    """Two norms; only the second gets an input beyond float16's range (65504)."""
    inputs = keras.Input((models.WIDTH,))
    h = keras.layers.Dense(models.WIDTH, name="dense_in")(inputs)
    h = tfnorm.LayerNormalization(name="healthy_norm")(h)
    h = keras.layers.Rescaling(1e6, name="blow_up")(h)
    h = tfnorm.LayerNormalization(name="overflowing_norm")(h)
    outputs = keras.layers.Dense(1, dtype="float32", name="head")(h)
    model = keras.Model(inputs, outputs, name="overflow")
    model.compile(keras.optimizers.SGD(0.01), "mse")
    return model


def _fit(model, callbacks, epochs=3, n=16):
    x, y = models.regression_data((models.WIDTH,), n=n)
    counter = models.StepCounter()
    model.fit(
        x, y, batch_size=4, epochs=epochs, callbacks=[*callbacks, counter], verbose=0
    )
    return counter.steps


def test_float16_overflow_is_reported_with_the_layer_name(mixed_policy):
    mixed_policy("mixed_float16")
    model = _overflow_model()
    probe, _ = models.regression_data((models.WIDTH,), n=4, seed=3)
    monitor = NormHealthMonitor(probe, every_n_steps=2)
    with pytest.warns(NormHealthWarning, match="overflowing_norm"):
        _fit(model, [monitor], epochs=1)
    layers = {problem.layer for problem in monitor.problems}
    assert "overflowing_norm" in layers
    assert "healthy_norm" not in layers
    # The loss is already NaN after step 1, and the probe run with that
    # report points at the norm whose input overflowed.
    at_step_1 = [(p.layer, p.statistic) for p in monitor.problems if p.step == 1]
    assert at_step_1[:2] == [
        (None, "loss"),
        ("overflowing_norm", "inputs/nonfinite_fraction"),
    ]
    first = next(p for p in monitor.problems if p.layer is not None)
    assert first.value == 1.0  # every value of the probe batch overflowed
    # Later periodic probes (step 2, 4) report it again.
    assert {p.step for p in monitor.problems if p.layer} == {1, 2, 4}


def test_the_same_model_in_float32_is_healthy():
    model = _overflow_model()
    probe, _ = models.regression_data((models.WIDTH,), n=4, seed=3)
    monitor = NormHealthMonitor(probe, every_n_steps=2, on_problem="raise")
    _fit(model, [monitor], epochs=1)
    assert monitor.problems == []


def test_stop_ends_training_at_the_first_problem(mixed_policy):
    mixed_policy("mixed_float16")
    model = _overflow_model()
    probe, _ = models.regression_data((models.WIDTH,), n=4, seed=3)
    monitor = NormHealthMonitor(probe, on_problem="stop", every_n_steps=1)
    with pytest.warns(NormHealthWarning):
        steps = _fit(model, [monitor], epochs=3)  # 12 steps if not stopped
    assert steps == 1
    assert model.stop_training


def test_raise_names_the_layer(mixed_policy):
    mixed_policy("mixed_float16")
    model = _overflow_model()
    probe, _ = models.regression_data((models.WIDTH,), n=4, seed=3)
    monitor = NormHealthMonitor(probe, on_problem="raise", every_n_steps=1)
    with pytest.raises(NormHealthError, match="overflowing_norm") as raised:
        _fit(model, [monitor])
    assert "healthy_norm" not in str(raised.value)
    named = [p.layer for p in raised.value.problems if p.layer is not None]
    assert named[0] == "overflowing_norm"
    assert str(raised.value).startswith(
        "Norm health problem in layer 'overflowing_norm'"
    )


def test_nan_loss_is_reported_even_without_probe_data():
    model = models.sequential_model()
    model.compile("sgd", "mse")
    x, y = models.regression_data((models.WIDTH,), n=16)
    x[5, 0] = np.nan  # second batch of 4
    monitor = NormHealthMonitor(on_problem="warn")
    with pytest.warns(NormHealthWarning, match="loss") as caught:
        model.fit(
            x, y, batch_size=4, epochs=2, shuffle=False, callbacks=[monitor], verbose=0
        )
    loss_problems = [p for p in monitor.problems if p.statistic == "loss"]
    # Once per epoch, not once per NaN step: at the poisoned step 2, then at
    # step 5, the first of epoch 2 (the weights are NaN by then).
    assert [p.step for p in loss_problems] == [2, 5]
    assert all(np.isnan(p.value) and p.layer is None for p in loss_problems)
    assert len([w for w in caught if issubclass(w.category, NormHealthWarning)]) == 2


def test_nan_loss_raises_without_probe_data():
    model = models.sequential_model()
    model.compile("sgd", "mse")
    x, y = models.regression_data((models.WIDTH,), n=8)
    x[0, 0] = np.nan
    with pytest.raises(NormHealthError, match="loss is nan"):
        model.fit(
            x,
            y,
            batch_size=4,
            callbacks=[NormHealthMonitor(on_problem="raise")],
            verbose=0,
        )


def test_collapsed_input_variance_is_reported_relative_to_epsilon():
    inputs = keras.Input((models.WIDTH,))
    wide = tfnorm.LayerNormalization(epsilon=1e-3, name="wide_norm")(inputs)
    tiny = keras.layers.Rescaling(1e-3, name="shrink")(inputs)
    narrow = tfnorm.LayerNormalization(epsilon=1e-3, name="narrow_norm")(tiny)
    model = keras.Model(inputs, [wide, narrow])
    x, _ = models.regression_data((models.WIDTH,), n=4)
    monitor = NormHealthMonitor(x, variance_floor=1.0)
    monitor.set_model(model)
    with pytest.warns(NormHealthWarning, match="narrow_norm"):
        problems = monitor.check(step=7)
    assert [(p.layer, p.statistic, p.step) for p in problems] == [
        ("narrow_norm", "inputs/variance_over_epsilon", 7)
    ]
    # Variance of N(0,1) inputs scaled by 1e-3, over epsilon 1e-3: ~1e-3.
    rows = np.var(x * np.float32(1e-3), axis=-1) / 1e-3
    np.testing.assert_allclose(problems[0].value, rows.min(), rtol=1e-3)
    assert problems[0].threshold == 1.0


def test_rms_norm_is_checked_on_its_mean_square():
    inputs = keras.Input((models.WIDTH,))
    tiny = keras.layers.Rescaling(1e-4)(inputs)
    outputs = tfnorm.RMSNorm(epsilon=1e-6, name="rms")(tiny)
    model = keras.Model(inputs, outputs)
    x, _ = models.regression_data((models.WIDTH,), n=4)
    monitor = NormHealthMonitor(x, variance_floor=1e3)
    monitor.set_model(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NormHealthWarning)
        (problem,) = monitor.check(step=1)
    assert problem.statistic == "inputs/mean_square_over_epsilon"
    expected = np.mean(np.square(x * np.float32(1e-4)), axis=-1).min() / 1e-6
    np.testing.assert_allclose(problem.value, expected, rtol=1e-3)


def test_a_norm_without_a_statistic_is_checked_on_its_outputs_only():
    # DyT has no statistic to compare with an epsilon: tiny inputs are no
    # problem for it, but a non-finite output still is.
    inputs = keras.Input((models.WIDTH,))
    tiny = keras.layers.Rescaling(1e-6)(inputs)
    calm = tfnorm.DynamicTanh(name="calm_dyt")(tiny)
    blown = tfnorm.DynamicTanh(name="blown_dyt")(keras.layers.Rescaling(np.nan)(inputs))
    model = keras.Model(inputs, [calm, blown])
    x, _ = models.regression_data((models.WIDTH,), n=4)
    monitor = NormHealthMonitor(x, variance_floor=1e3)
    monitor.set_model(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NormHealthWarning)
        problems = monitor.check(step=2)
    assert {(p.layer, p.statistic) for p in problems} == {
        ("blown_dyt", "inputs/nonfinite_fraction"),
        ("blown_dyt", "outputs/nonfinite_fraction"),
    }


def test_variance_floor_zero_turns_the_variance_check_off():
    inputs = keras.Input((models.WIDTH,))
    outputs = tfnorm.LayerNormalization()(keras.layers.Rescaling(0.0)(inputs))
    monitor = NormHealthMonitor(
        models.regression_data((models.WIDTH,), n=2)[0], variance_floor=0
    )
    monitor.set_model(keras.Model(inputs, outputs))
    assert monitor.check(step=0) == []


def test_healthy_nested_model_reports_nothing():
    model = models.nested_model()
    model.compile("sgd", "mse")
    x, _ = models.regression_data((models.SEQ, models.WIDTH), n=4)
    monitor = NormHealthMonitor(x, on_problem="raise", every_n_steps=1)
    _fit_nested = models.regression_data((models.SEQ, models.WIDTH), n=8)
    model.fit(*_fit_nested, batch_size=4, callbacks=[monitor], verbose=0)
    assert monitor.problems == []


def test_bad_on_problem_lists_the_choices():
    with pytest.raises(ValueError, match=r"'warn', 'stop', 'raise'.*on_problem='halt'"):
        NormHealthMonitor(on_problem="halt")


def test_bad_variance_floor_is_rejected():
    with pytest.raises(ValueError, match="Received: variance_floor=-1"):
        NormHealthMonitor(variance_floor=-1)


def test_is_exported_from_tfnorm_callbacks():
    assert tfnorm.callbacks.NormHealthMonitor is NormHealthMonitor

"""Tests for `tfnorm.training.WarmupSchedule`."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.conftest import run_python
from tfnorm._keras import keras
from tfnorm.optim import WarmupSchedule, make_optimizer


def _rates(schedule, steps):
    return np.array([float(schedule(step)) for step in steps])


def _reference(step, peak, warmup, total, decay, final):
    if step < warmup:
        return peak * (step + 1) / warmup
    if decay == "constant":
        return peak
    if decay == "inverse_sqrt":
        return max(final, peak * math.sqrt(max(warmup, 1) / (step + 1)))
    progress = min(max((step - warmup) / max(total - warmup, 1), 0.0), 1.0)
    if decay == "linear":
        return peak + (final - peak) * progress
    return final + (peak - final) * 0.5 * (1 + math.cos(math.pi * progress))


@pytest.mark.parametrize("decay", ["cosine", "linear", "inverse_sqrt", "constant"])
def test_matches_the_formula_at_every_step(decay):
    schedule = WarmupSchedule(2e-3, 10, 50, decay=decay, final_lr=1e-4)
    steps = range(0, 70)
    expected = [_reference(s, 2e-3, 10, 50, decay, 1e-4) for s in steps]
    np.testing.assert_allclose(_rates(schedule, steps), expected, rtol=1e-5)


def test_warmup_rises_linearly_to_the_peak_and_never_starts_at_zero():
    rates = _rates(WarmupSchedule(1e-3, 4, 100), range(5))
    np.testing.assert_allclose(rates[:4], [2.5e-4, 5e-4, 7.5e-4, 1e-3], rtol=1e-6)
    assert rates[0] > 0


@pytest.mark.parametrize("decay", ["cosine", "linear"])
def test_decays_end_at_final_lr_and_stay_there(decay):
    rates = _rates(
        WarmupSchedule(1e-3, 5, 20, decay=decay, final_lr=1e-5), [20, 25, 1000]
    )
    np.testing.assert_allclose(rates, [1e-5] * 3, rtol=1e-5)


def test_zero_warmup_starts_at_the_peak():
    assert float(WarmupSchedule(1e-3, 0, 10)(0)) == pytest.approx(1e-3)


def test_accepts_a_tensor_step_like_optimizer_iterations():
    from tfnorm._keras import tf

    rate = WarmupSchedule(1e-3, 10, 100)(tf.constant(4, tf.int64))
    assert float(rate) == pytest.approx(5e-4)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"peak_lr": 0.0}, "peak_lr=0.0"),
        ({"peak_lr": "1e-3"}, "peak_lr='1e-3'"),
        ({"warmup_steps": -1}, "warmup_steps=-1"),
        ({"warmup_steps": 2.5}, "warmup_steps=2.5"),
        ({"total_steps": 5}, "total_steps=5, warmup_steps=10"),
        ({"total_steps": None}, "total_steps=None"),
        ({"decay": "exp"}, "decay='exp'"),
        ({"final_lr": 1.0}, "final_lr=1.0"),
        ({"final_lr": -1e-4}, "final_lr=-0.0001"),
    ],
)
def test_invalid_arguments_name_the_argument_and_value(kwargs, message):
    arguments = {"peak_lr": 1e-3, "warmup_steps": 10, "total_steps": 100}
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        WarmupSchedule(**arguments)


@pytest.mark.parametrize("decay", ["inverse_sqrt", "constant"])
def test_open_ended_decays_need_no_total_steps(decay):
    schedule = WarmupSchedule(1e-3, 10, decay=decay)
    assert float(schedule(10_000)) > 0


def test_config_round_trip_gives_the_same_rates():
    schedule = WarmupSchedule(3e-4, 7, 40, decay="linear", final_lr=1e-5)
    config = keras.optimizers.schedules.serialize(schedule)
    restored = keras.optimizers.schedules.deserialize(config)
    assert isinstance(restored, WarmupSchedule)
    assert restored.get_config() == schedule.get_config()
    steps = range(0, 50, 3)
    np.testing.assert_allclose(_rates(restored, steps), _rates(schedule, steps))


def test_optimizer_config_keeps_the_schedule():
    optimizer = make_optimizer("adamw", WarmupSchedule(1e-3, 5, 50))
    config = keras.optimizers.serialize(optimizer)
    restored = keras.optimizers.deserialize(config)
    assert isinstance(restored.learning_rate, WarmupSchedule) or isinstance(
        getattr(restored, "_learning_rate", None), WarmupSchedule
    )


def test_saved_model_reloads_its_schedule_in_a_fresh_process(tmp_path):
    # The fresh process has only `import tfnorm`: registration must be enough.
    from tfnorm import _keras

    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    model.compile(
        optimizer=make_optimizer("adamw", WarmupSchedule(1e-3, 5, 50, decay="linear")),
        loss="mse",
    )
    model.fit(np.ones((4, 3)), np.ones((4, 2)), epochs=1, verbose=0)
    path = _keras.save_model(model, tmp_path / "model")
    out = run_python(
        f"""
        import tfnorm
        from tfnorm._keras import keras
        model = keras.models.load_model({str(path)!r})
        opt = model.optimizer
        opt = getattr(opt, "inner_optimizer", opt)
        lr = getattr(opt, "_learning_rate", None) or opt.learning_rate
        print(type(opt).__name__, type(lr).__name__, lr.get_config()["decay"])
        print(float(lr(4)))
        """
    )
    lines = out.strip().splitlines()
    assert lines[-2] == "AdamW WarmupSchedule linear"
    assert float(lines[-1]) == pytest.approx(1e-3)

"""`tfnorm.training.workloads.build`: the run's schedule and optimizer from its settings."""

from __future__ import annotations

import pytest

from tfnorm._keras import keras
from tfnorm.training.config.train_config import TrainConfig
from tfnorm.training.workloads.build import run_optimizer, run_schedule


def _config(**settings):
    return TrainConfig(task="sorted", **settings).resolve()


def test_the_schedule_decays_to_min_learning_rate():
    config = _config(learning_rate=1e-2, min_learning_rate=1e-3, decay="linear")
    schedule = run_schedule(config, total_steps=10)
    assert float(schedule(0)) == pytest.approx(1e-2)
    assert float(schedule(10)) == pytest.approx(1e-3)
    assert float(run_schedule(_config(decay="linear"), 10)(10)) == 0.0


def test_adams_settings_reach_the_optimizer():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    config = _config(beta1=0.8, beta2=0.95, adam_epsilon=1e-6)
    optimizer = run_optimizer(config, model, 1e-3)
    # Keras 2.9 keeps them as hyperparameter tensors.
    values = [
        float(optimizer.beta_1),
        float(optimizer.beta_2),
        float(optimizer.epsilon),
    ]
    assert values == pytest.approx([0.8, 0.95, 1e-6])
    bias = model.layers[-1].bias
    assert not optimizer.decays_variable(bias)
    everything = run_optimizer(_config(weight_decay_on="all"), model, 1e-3)
    assert everything.decays_variable(bias)

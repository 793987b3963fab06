"""What every callback shares: argument checks, step counting, training untouched."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tfnorm
from tests.callbacks import models
from tfnorm._keras import keras
from tfnorm.callbacks.base import validate_log_dir


def test_every_n_steps_must_be_a_positive_int():
    with pytest.raises(ValueError, match="Received: every_n_steps=0"):
        tfnorm.callbacks.NormHistogramCallback(
            "unused", np.zeros((1, 8)), every_n_steps=0
        )


def test_an_existing_or_creatable_log_dir_is_accepted(tmp_path):
    assert validate_log_dir(tmp_path) == str(tmp_path)
    assert validate_log_dir(str(tmp_path / "new" / "deeper")) == str(
        tmp_path / "new" / "deeper"
    )
    assert not (tmp_path / "new").exists()  # checked, not created


def _a_file(tmp_path):
    path = tmp_path / "events.txt"
    path.write_text("not a directory")
    return path


@pytest.mark.parametrize(
    "make_log_dir, message",
    [
        (lambda tmp: "", "non-empty directory path"),
        (lambda tmp: 5, "Received: log_dir=5"),
        (lambda tmp: None, "Received: log_dir=None"),
        (lambda tmp: _a_file(tmp), "is a file"),
        (lambda tmp: _a_file(tmp) / "below", "is a file"),
    ],
    ids=["empty", "int", "none", "file", "below_a_file"],
)
@pytest.mark.parametrize(
    "make_callback",
    [
        lambda log_dir: tfnorm.callbacks.NormHistogramCallback(
            log_dir, np.zeros((1, 8), "float32")
        ),
        lambda log_dir: tfnorm.callbacks.GradientNormCallback(
            log_dir, (np.zeros((1, 8), "float32"), np.zeros((1, 1), "float32"))
        ),
    ],
    ids=["histogram", "gradient"],
)
def test_a_bad_log_dir_fails_at_construction(
    tmp_path, make_log_dir, message, make_callback
):
    with pytest.raises(ValueError, match=f"`log_dir`.*{message}"):
        make_callback(make_log_dir(tmp_path))


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write to any directory")
def test_an_unwritable_log_dir_fails_at_construction(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(ValueError, match="must be writable"):
        validate_log_dir(locked / "logs")


def _train(seed, callbacks):
    keras.utils.set_random_seed(seed)
    model = models.nested_model(dropout_rate=0.5)
    model.compile(keras.optimizers.Adam(1e-2), "mse")
    x, y = models.regression_data((models.SEQ, models.WIDTH), n=32)
    model.fit(
        x, y, batch_size=8, epochs=2, shuffle=True, callbacks=callbacks, verbose=0
    )
    return model


def test_callbacks_change_neither_weights_nor_variables(tmp_path):
    x, y = models.regression_data((models.SEQ, models.WIDTH), n=8, seed=1)
    callbacks = [
        tfnorm.callbacks.NormHistogramCallback(
            tmp_path / "h", x, every_n_steps=1, record=("inputs", "outputs")
        ),
        tfnorm.callbacks.NormHealthMonitor(x, every_n_steps=1),
        tfnorm.callbacks.GradientNormCallback(tmp_path / "g", (x, y), every_n_steps=1),
    ]
    plain = _train(7, [])
    probed = _train(7, callbacks)
    assert callbacks[0].writer.is_open  # the callbacks did run
    assert len(probed.variables) == len(plain.variables)
    assert len(probed.trainable_weights) == len(plain.trainable_weights)
    for a, b in zip(plain.weights, probed.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.name)
    # The comparison can fail: another seed gives other weights.
    other = _train(8, [])
    assert any(
        not np.array_equal(np.asarray(a), np.asarray(b))
        for a, b in zip(plain.trainable_weights, other.trainable_weights)
    )


_WRONG_WIDTH = np.zeros((2, models.WIDTH + 3), "float32")


@pytest.mark.parametrize(
    "make_callback",
    [
        lambda log_dir: tfnorm.callbacks.NormHistogramCallback(
            log_dir, _WRONG_WIDTH, every_n_steps=3
        ),
        lambda log_dir: tfnorm.callbacks.NormHealthMonitor(
            _WRONG_WIDTH, every_n_steps=3
        ),
        lambda log_dir: tfnorm.callbacks.GradientNormCallback(
            log_dir, (_WRONG_WIDTH, np.zeros((2, 1), "float32")), every_n_steps=3
        ),
    ],
    ids=["histogram", "health", "gradient"],
)
def test_probe_data_the_model_cannot_take_fails_before_the_first_step(
    tmp_path, make_callback
):
    model = models.sequential_model()
    model.compile("sgd", "mse")
    x, y = models.regression_data((models.WIDTH,), n=16)
    counter = models.StepCounter()
    with pytest.raises(ValueError, match=r"`data` cannot be fed to model 'seq'"):
        model.fit(
            x,
            y,
            batch_size=4,
            callbacks=[make_callback(tmp_path), counter],
            verbose=0,
        )
    assert counter.steps == 0

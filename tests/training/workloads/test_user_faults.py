"""Own-model runs whose user code misbehaves mid-way or in a form that reads
two ways (`tests/training/user_faults.py`); the refusals before step 0 are
rows of tests/cli/test_train_bad_input.py."""

from __future__ import annotations

import io
import json
import os

import pytest

from tests.training import user_faults
from tfnorm._keras import tf
from tfnorm.training.data import DataError
from tfnorm.training.trainer import train

SETTINGS = {
    "batch_size": 16,
    "log_every": 3,
    "checkpoint_every": 3,
    "histogram_every": 0,
    "export": False,
}


def run(logdir, model, data, **overrides):
    out = io.StringIO()
    summary = train(
        dict(SETTINGS, logdir=str(logdir), **overrides),
        handle_signals=False,
        stdout=out,
        model_fn=model,
        data_fn=data,
    )
    return summary, out.getvalue()


def checkpoint_steps(logdir):
    state = tf.train.get_checkpoint_state(os.path.join(logdir, "checkpoints"))
    return [int(path.rsplit("-", 1)[1]) for path in state.all_model_checkpoint_paths]


def test_a_label_out_of_range_mid_run_is_one_line_and_keeps_the_checkpoints(tmp_path):
    # Label 7 of 2 classes in the 5th batch: steps 1-4 train, step 3 is saved.
    with pytest.raises(DataError) as error:
        run(
            tmp_path / "run",
            user_faults.dense_model,
            user_faults.late_bad_label_dataset,
        )
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(
        "step 5: data_fn's training batch holds label 7, outside the valid range [0, 2)"
    ), message
    assert checkpoint_steps(tmp_path / "run") == [3]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "bad_data" and summary["exit_status"] == 2
    assert summary["final_step"] == 4
    assert summary["checkpoint"].endswith("ckpt-3")


def test_a_generator_dataset_trains_and_resumes_from_its_start_with_a_warning(
    tmp_path,
):
    logdir = tmp_path / "run"
    first, out = run(
        logdir, user_faults.dense_model, user_faults.generator_data,
        steps_per_epoch=6, epochs=1,
    )  # fmt: skip
    assert first["status"] == "completed" and first["final_step"] == 6, out
    warnings = [line for line in out.splitlines() if "Dataset.from_generator" in line]
    assert len(warnings) == 1 and "a resume starts the data over" in warnings[0]
    second, out = run(
        logdir, user_faults.dense_model, user_faults.generator_data,
        steps_per_epoch=6, epochs=2,
    )  # fmt: skip
    assert second["status"] == "completed" and second["final_step"] == 12
    assert "resumed from step 6" in out


MOVING_MODULE = """
import os

import numpy as np
import tensorflow as tf

ELSEWHERE = {elsewhere!r}
if {at_import}:
    os.chdir(ELSEWHERE)


def model():
    if {in_model}:
        os.chdir(ELSEWHERE)
    inputs = tf.keras.Input((4,))
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(2)(inputs))
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def data():
    if {in_data}:
        os.chdir(ELSEWHERE)
    return np.ones((32, 4), "float32"), np.zeros(32, "int32")
"""


@pytest.mark.parametrize("where", ["at_import", "in_model", "in_data"])
def test_user_code_changing_directory_moves_no_output(tmp_path, monkeypatch, where):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    flags = {key: key == where for key in ("at_import", "in_model", "in_data")}
    (tmp_path / "moving_module.py").write_text(
        MOVING_MODULE.format(elsewhere=str(elsewhere), **flags)
    )
    monkeypatch.chdir(tmp_path)
    config = dict(
        SETTINGS, logdir="run", log_file="train.log", epochs=1,
        model_fn="moving_module.py:model", data_fn="moving_module.py:data",
    )  # fmt: skip
    summary = train(config, handle_signals=False, stdout=io.StringIO())
    assert summary["status"] == "completed"
    assert (tmp_path / "run" / "summary.json").is_file()
    assert (tmp_path / "run" / "checkpoints" / "run_config.json").is_file()
    assert "finished at step 2" in (tmp_path / "train.log").read_text()
    assert os.listdir(elsewhere) == []


@pytest.mark.parametrize(
    "data_fn",
    ["two_inputs_data", "two_inputs_tuple_data", "two_input_train_and_validation"],
)
def test_a_list_of_inputs_is_read_as_the_features_of_a_two_input_model(
    tmp_path, data_fn
):
    summary, _ = run(
        tmp_path / "run", user_faults.two_input_model, getattr(user_faults, data_fn)
    )
    assert summary["status"] == "completed"
    assert summary["data"]["train"].startswith(
        "80 " if "validation" in data_fn else "96 "
    )


def test_an_empty_validation_dataset_is_not_mistaken_for_an_empty_training_one(
    tmp_path,
):
    summary, _ = run(
        tmp_path / "run", user_faults.dense_model, user_faults.empty_validation_data
    )
    assert summary["status"] == "completed"

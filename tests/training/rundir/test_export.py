"""The export of a run: checked by loading it back, and what it is when it
does not load back the same."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest

from tests.training import user_module
from tests.training.workloads.test_own_model import run
from tfnorm import _keras
from tfnorm._keras import tf
from tfnorm.training import train
from tfnorm.training.rundir import export


def load(line):
    """Runs an export's one line of Python; returns the `model` it makes."""
    namespace = {}
    exec(line, namespace)  # noqa: S102 - the line the run gives users
    return namespace["model"]


def checkpoint_model(model_fn, checkpoint, inputs):
    model = model_fn()
    model(inputs)
    tf.train.Checkpoint(model=model).read(checkpoint).expect_partial()
    return model


def test_a_model_reloading_with_other_outputs_is_exported_as_its_weights(tmp_path):
    summary, out = run(
        tmp_path, "run", user_module.forgetful_model, user_module.array_data,
        export=True,
    )  # fmt: skip
    assert summary["status"] == "completed" and summary["exit_status"] == 0
    exported = summary["export"]
    assert exported["kind"] == "weights", exported
    assert "outputs differ from the trained model's" in exported["reason"]
    # What a model of one's own needs to export whole.
    assert exported["reason"].endswith(export.OWN_CLASSES_ADVICE)
    assert "model exported to" not in out
    assert f"Its weights are in {exported['path']}; load them with: " in out
    assert exported["path"] == summary["model_path"]
    assert exported["path"].endswith(export.WEIGHTS_FILE)
    logdir = tmp_path / "run"
    assert [n for n in os.listdir(logdir) if n.startswith("model")] == [
        export.WEIGHTS_FILE
    ]
    x = user_module.arrays(5)[0]
    trained = checkpoint_model(user_module.forgetful_model, summary["checkpoint"], x)
    np.testing.assert_allclose(load(exported["load"])(x), trained(x), atol=1e-6)


def test_a_model_that_cannot_be_saved_whole_says_how_to_load_its_weights(tmp_path):
    summary, out = run(
        tmp_path, "run", user_module.unsaveable_model, user_module.array_data,
        export=True,
    )  # fmt: skip
    exported = summary["export"]
    if _keras.NATIVE_FORMAT != "keras":
        # A SavedModel needs no get_config: it reloads, and is checked.
        assert exported["kind"] == "model", exported
        return
    assert (
        exported["kind"] == "weights" and "cannot be saved whole" in exported["reason"]
    )
    x = user_module.arrays(4)[0]
    trained = checkpoint_model(user_module.unsaveable_model, summary["checkpoint"], x)
    np.testing.assert_allclose(load(exported["load"])(x), trained(x), atol=1e-6)


def test_a_checked_export_is_the_model_and_says_how_to_load_it(tmp_path):
    from tests.inference.test_prediction import run_config

    summary = train(run_config(tmp_path), stdout=io.StringIO())
    exported = summary["export"]
    assert exported["kind"] == "model" and exported["reason"] is None, exported
    assert exported["path"] == summary["model_path"]
    model = load(exported["load"])
    ids = np.ones((2, 5), "int32")
    original = tf.keras.models.load_model(exported["path"], compile=False)
    np.testing.assert_array_equal(model(ids), original(ids))
    assert not os.path.exists(tmp_path / "run" / export.WEIGHTS_FILE)


LEFTOVERS = (
    "model.tmp4242.0badf00d.keras",
    "model.tmp4242.0badf00d",
    "model.old7.12345678",
)


def test_what_an_export_killed_midway_left_is_removed_by_the_next_run(tmp_path):
    from tests.inference.test_prediction import run_config

    config = run_config(tmp_path)
    summary = train(config, stdout=io.StringIO())
    logdir = tmp_path / "run"
    for name in LEFTOVERS:
        if "." in name.rsplit("0badf00d", 1)[-1] or name.startswith("model.old"):
            (logdir / name).write_bytes(b"half an archive")
        else:
            (logdir / name).mkdir()
            (logdir / name / "saved_model.pb").write_bytes(b"half")
    (logdir / "model.tmp.notes").write_text("not an export's name: kept")
    # The rerun resumes at the final step and exports again; with
    # --no-export it still starts, and cleans up as it starts.
    again = train(dict(config, export=False), stdout=io.StringIO())
    assert again["status"] == "completed" and summary["status"] == "completed"
    left = sorted(name for name in os.listdir(logdir) if name.startswith("model"))
    assert left == sorted(["model.tmp.notes", os.path.basename(summary["model_path"])])


def test_a_full_disk_during_the_export_leaves_no_temporary_file(tmp_path, monkeypatch):
    model = user_module.forgetful_model()

    def full(model, base, *args, **kwargs):
        path = _keras.model_path(base, _keras.NATIVE_FORMAT)
        if _keras.NATIVE_FORMAT == "tf":  # a SavedModel directory
            os.makedirs(path)
            path = os.path.join(path, "saved_model.pb")
        with open(path, "w"):
            pass  # as far as the save got
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_keras, "save_model", full)
    with pytest.raises(OSError, match="No space left"):
        export.export_model(model, str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_summary_records_the_export_as_json(tmp_path):
    from tests.inference.test_prediction import run_config

    train(run_config(tmp_path), stdout=io.StringIO())
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["export"]["kind"] == "model"
    assert saved["export"]["load"].startswith("import tensorflow as tf, tfnorm; ")


def test_the_export_replaces_a_link_planted_during_the_run(tmp_path):
    from tfnorm import _keras

    if _keras.NATIVE_FORMAT == "tf":
        pytest.skip("a SavedModel directory is checked, not renamed (TF 2.9)")
    secret = tmp_path / "notes.txt"
    secret.write_text("mine\n")
    path = _keras.model_path(str(tmp_path / "model"), _keras.NATIVE_FORMAT)
    os.symlink(secret, path)
    inputs = _keras.keras.Input((3,))
    model = _keras.keras.Model(inputs, _keras.keras.layers.Dense(2)(inputs))
    assert export.export_model(model, str(tmp_path)).path == path
    assert secret.read_text() == "mine\n" and not os.path.islink(path)
    assert sorted(os.listdir(tmp_path)) == sorted(["notes.txt", os.path.basename(path)])
    _keras.keras.models.load_model(path)


class Unregistered(_keras.keras.layers.Layer):
    """A layer with a config whose class Keras does not know by name."""

    def call(self, inputs):
        return inputs * 2.0


def test_a_model_that_does_not_load_back_quotes_keras_in_full(tmp_path):
    if not _keras.IS_KERAS_3:
        # TF 2.9's SavedModel revives a class it does not know; tf_keras's
        # reason is one short TypeError (a class of an importable module
        # reloads as a string: "'str' object is not callable").
        pytest.skip("Keras 3's reason is the long one, with configs in it")
    inputs = _keras.keras.Input((3,))
    model = _keras.keras.Model(inputs, Unregistered()(inputs))
    exported = export.export_model(model, str(tmp_path), np.ones((2, 3), "float32"))
    assert exported.kind == "weights"
    reason = exported.reason
    # Keras's reason, whole: it names the class and the decorator to add,
    # and ends its last sentence; the model's config it quotes is shortened.
    assert "Unregistered" in reason and "register_keras_serializable" in reason
    assert "so that the decorator is run before trying to load them." in reason
    assert "'config': {" not in reason and "{...}" in reason

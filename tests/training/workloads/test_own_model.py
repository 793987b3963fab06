"""`train(..., model_fn=..., data_fn=...)`: the user's own model and data.

The user's code is `tests/training/user_module.py` (keras.io-style
subclassed blocks). Every run is tiny; the kill -9 trials of the same
module run in tests/cli/test_train_faults.py.
"""

from __future__ import annotations

import glob
import io
import json
import os

import numpy as np
import pytest

from tests.conftest import REPO, run_python
from tests.training import user_faults, user_module
from tfnorm import _keras
from tfnorm._keras import tf
from tfnorm.settings.config_error import ConfigError
from tfnorm.training.data import DataError
from tfnorm.training.trainer import train
from tfnorm.training.workloads.user_code import UserCodeError
from tfnorm.training.workloads.weight_records import model_signature

MODULE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "user_module.py")
SETTINGS = {
    "batch_size": 16,
    "log_every": 2,
    "checkpoint_every": 3,
    "histogram_every": 0,
    "export": False,
}


def run(tmp_path, name, model, data, **overrides):
    """Trains the callables `model`/`data` (or names given in `overrides`)."""
    config = dict(SETTINGS, logdir=str(tmp_path / name), **overrides)
    out = io.StringIO()
    summary = train(
        config, handle_signals=False, stdout=out, model_fn=model, data_fn=data
    )
    return summary, out.getvalue()


def checkpoint_values(logdir):
    path = tf.train.latest_checkpoint(os.path.join(logdir, "checkpoints"))
    reader = tf.train.load_checkpoint(path)
    dtypes = reader.get_variable_to_dtype_map()
    return {
        name: reader.get_tensor(name)
        for name in dtypes
        if name != "_CHECKPOINTABLE_OBJECT_GRAPH" and dtypes[name] != tf.variant
    }


def test_compiled_subclassed_model_on_arrays_keeps_its_optimizer_and_metrics(tmp_path):
    summary, out = run(
        tmp_path, "run", user_module.compiled_model, user_module.array_data, epochs=2
    )
    assert summary["status"] == "completed" and summary["final_step"] == 10
    assert "accuracy" in summary["metrics"] and "val_accuracy" in summary["metrics"]
    assert "5 training examples" not in out and "80 training examples" in out
    # The model's own Adam (constant 1e-3), not the run's AdamW schedule.
    assert summary["metrics"]["learning_rate"] == pytest.approx(1e-3)
    # The dropout generators' state is saved beside the model.
    names = checkpoint_values(summary["logdir"]).keys()
    assert any(name.startswith("random_state/") for name in names)


def test_uncompiled_model_gets_the_run_optimizer_and_the_named_loss(tmp_path):
    summary, out = run(
        tmp_path, "run", user_module.subclassed_model, user_module.dataset_data,
        loss="sparse_categorical_crossentropy", from_logits=True,
        warmup_steps=4, learning_rate=1e-2, epochs=2,
    )  # fmt: skip
    assert summary["status"] == "completed" and summary["final_step"] == 10
    rates = [float(r) for r in __import__("re").findall(r" lr ([0-9.e+-]+)", out)]
    assert rates[0] < rates[1], "the warm-up schedule applies"
    assert np.isfinite(summary["metrics"]["val_loss"])


def test_an_uncompiled_model_without_loss_is_refused_naming_loss(tmp_path):
    with pytest.raises(ConfigError, match=r"name its loss \(loss, ") as error:
        run(tmp_path, "run", user_module.subclassed_model, user_module.array_data)
    assert error.value.key == "loss"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("data_fn", ["array_data", "dataset_data"])
def test_resume_continues_exactly_with_dropout_on(tmp_path, data_fn):
    """Stopped after one epoch and resumed for the second, the weights (and the
    optimizer, the data position, the dropout generators) end bit for bit
    where an uninterrupted two-epoch run ends."""
    data = getattr(user_module, data_fn)
    whole, _ = run(tmp_path, "whole", user_module.compiled_model, data, epochs=2)
    first, _ = run(tmp_path, "parts", user_module.compiled_model, data, epochs=1)
    second, out = run(tmp_path, "parts", user_module.compiled_model, data, epochs=2)
    assert first["final_step"] == 5 and second["resumed_from_step"] == 5
    assert "resumed from step 5" in out
    expected = checkpoint_values(whole["logdir"])
    actual = checkpoint_values(second["logdir"])
    assert expected.keys() == actual.keys()
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


CHANGING_MODULE = """
import tensorflow as tf

WIDTH = {width}


def build():
    inputs = tf.keras.Input((4,))
    hidden = tf.keras.layers.Dense(WIDTH, activation="relu")(inputs)
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(2)(hidden))
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def data():
    import numpy as np

    return np.ones((32, 4), "float32"), np.zeros(32, "int32")
"""


def test_a_changed_model_is_refused_on_resume_and_nothing_restored(tmp_path):
    module = tmp_path / "changing_model.py"
    module.write_text(CHANGING_MODULE.format(width=8))
    names = {"model_fn": f"{module}:build", "data_fn": f"{module}:data"}
    run(tmp_path, "run", None, None, **names)
    before = {
        path: os.path.getmtime(path)
        for path in glob.glob(str(tmp_path / "run" / "checkpoints" / "*"))
    }
    module.write_text(CHANGING_MODULE.format(width=12))
    import sys

    sys.modules.pop("changing_model", None)
    with pytest.raises(ConfigError, match="other weights") as error:
        run(tmp_path, "run", None, None, epochs=2, **names)
    assert error.value.key == "model_fn"
    after = {
        path: os.path.getmtime(path)
        for path in glob.glob(str(tmp_path / "run" / "checkpoints" / "*"))
    }
    assert after == before


def test_signature_ignores_keras_per_process_name_suffixes():
    first, second = user_module.functional_model(), user_module.functional_model()
    assert model_signature(first) == model_signature(second)


def test_names_are_loaded_from_a_file_path(tmp_path):
    summary, _ = run(
        tmp_path, "run", None, None,
        **{"model_fn": f"{MODULE}:compiled_model", "data_fn": f"{MODULE}:dict_data"},
    )  # fmt: skip
    assert summary["status"] == "completed"
    saved = json.loads(
        (tmp_path / "run" / "checkpoints" / "run_config.json").read_text()
    )
    assert saved["model_fn"] == f"{MODULE}:compiled_model"
    assert saved["run_identity"]["model_signature"]


def test_histograms_cover_norms_nested_in_subclassed_layers(tmp_path):
    summary, _ = run(
        tmp_path, "run", user_module.compiled_model, user_module.array_data,
        histogram_every=5,
    )  # fmt: skip
    tags = set()
    for path in glob.glob(str(tmp_path / "run" / "norms" / "events.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update(value.tag for value in event.summary.value)
    # Both LayerNormalizations held as attributes of the user's block.
    nested = {tag.split("/")[1] for tag in tags if tag.startswith("transformer_block")}
    assert len({name for name in nested if "layer_normalization" in name}) == 2, tags


@pytest.mark.parametrize(
    "model_fn, data_fn, error_type, expected",
    [
        (
            "raising_model",
            "array_data",
            UserCodeError,
            "RuntimeError: the GPU is on fire",
        ),
        ("no_model", "array_data", ConfigError, "returned NoneType, not a Keras model"),
        ("exit_3_model", "array_data", UserCodeError, r"called sys\.exit\(3\) at "),
        ("dense_model", "unbatched_data", DataError, "yields single examples"),
        ("dense_model", "late_bad_label_arrays", DataError, r"hold 7 \(example 70\)"),
        ("compiled_model", "wrong_shape_data", DataError, "cannot be fed"),
        ("compiled_model", "labels_outside_outputs", DataError, "do not fit"),
        ("compiled_model", "not_data", DataError, "data_fn must return"),
    ],
)
def test_broken_user_code_fails_before_anything_is_created(
    tmp_path, model_fn, data_fn, error_type, expected
):
    def function(name):
        return getattr(user_module, name, None) or getattr(user_faults, name)

    with pytest.raises(error_type, match=expected):
        run(tmp_path, "run", function(model_fn), function(data_fn))
    assert not (tmp_path / "run").exists()


MIRRORED_RUN = """
import io, json
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2
)
from tests.training import user_faults, user_module
from tfnorm.training.trainer import train

out = io.StringIO()
summary = train(
    {settings},
    handle_signals=False,
    stdout=out,
    model_fn=user_module.compiled_model,
    data_fn=user_module.{data_fn},
)
print(json.dumps({{"summary": summary, "out": out.getvalue()}}, default=str))
"""


@pytest.mark.parametrize("data_fn", ["array_data", "dataset_data"])
def test_mirrored_over_two_cpus_trains_the_users_model(tmp_path, data_fn):
    # In a process of its own: TensorFlow keys collective all-reduce instances
    # per process, and another test's MirroredStrategy over the same devices
    # with other shapes would clash with this one's ("Shape mismatch").
    settings = dict(
        SETTINGS, logdir=str(tmp_path / "run"), strategy="mirrored",
        devices=["/cpu:0", "/cpu:1"], epochs=2,
    )  # fmt: skip
    code = MIRRORED_RUN.format(settings=repr(settings), data_fn=data_fn)
    result = json.loads(run_python(code, cwd=REPO, timeout=600).splitlines()[-1])
    summary, out = result["summary"], result["out"]
    assert "2 replica(s)" in out
    assert summary["status"] == "completed" and summary["final_step"] == 10
    assert np.isfinite(summary["metrics"]["val_loss"])


def test_mixed_precision_builds_the_users_model_under_the_policy(tmp_path):
    summary, out = run(
        tmp_path, "run", user_module.subclassed_model, user_module.array_data,
        loss="sparse_categorical_crossentropy", from_logits=True,
        mixed_precision="mixed_float16",
    )  # fmt: skip
    assert "policy mixed_float16" in out
    assert summary["status"] == "completed"
    assert np.isfinite(summary["metrics"]["loss"])


def test_nan_guard_names_the_norm_nested_in_the_users_block(tmp_path):
    summary, out = run(tmp_path, "run", user_module.float_model, user_module.nan_data)
    assert summary["status"] == "nan" and summary["final_step"] == 0
    assert "The first norm layer hit is normed_block/layer_normalization" in out, out
    assert not glob.glob(str(tmp_path / "run" / "checkpoints" / "ckpt-*"))


@pytest.mark.skipif(
    _keras.NATIVE_FORMAT != "keras",
    reason="Keras 2.9 exports a SavedModel, which needs no get_config",
)
def test_a_model_that_cannot_be_saved_whole_exports_its_weights(tmp_path):
    summary, out = run(
        tmp_path, "run", user_module.unsaveable_model, user_module.array_data,
        export=True,
    )  # fmt: skip
    assert summary["status"] == "completed"
    assert summary["model_path"].endswith("model.weights.h5"), summary["model_path"]
    assert "cannot be saved whole (NotImplementedError" in out
    # Rebuilt with model_fn, the weights load: outputs differ from a fresh
    # model's (another initialisation) and equal the final checkpoint's.
    x = user_module.arrays(4)[0]
    fresh, rebuilt = user_module.unsaveable_model(), user_module.unsaveable_model()
    rebuilt(x)
    rebuilt.load_weights(summary["model_path"])
    from_checkpoint = user_module.unsaveable_model()
    from_checkpoint(x)
    tf.train.Checkpoint(model=from_checkpoint).read(
        summary["checkpoint"]
    ).expect_partial()
    np.testing.assert_allclose(rebuilt(x), from_checkpoint(x), atol=1e-6)
    assert not np.allclose(rebuilt(x), fresh(x), atol=1e-3)

"""What a run of the user's own model says when it stops or refuses to resume.

Each row is a small module a user could write (a Dense model on a few
arrays), trained for a few steps: the NaN guard's report must name what
applies to the user's model and blame the data when the data is at fault,
and a refused resume must say what differs.
"""

from __future__ import annotations

import io
import re
import sys

import pytest

from tfnorm._keras import tf
from tfnorm.settings.config_error import ConfigError
from tfnorm.training.trainer import train

MODULE = """
import numpy as np
import tensorflow as tf

WIDTH = {width}


def build():
    model = tf.keras.Sequential(
        [tf.keras.Input((4,)), tf.keras.layers.Dense(WIDTH), tf.keras.layers.Dense(2)]
    )
    model.compile(
        optimizer=tf.keras.optimizers.SGD({learning_rate}),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def uncompiled():
    return tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2)])


def data():
    x = {features}
    return x.astype("float32"), (np.arange(len(x)) % 2).astype("int32")
"""

SEEDED = "np.random.RandomState(0).normal(size=(32, 4))"
# Example 20 (in the third batch of 8 with --seed 0's order) holds a NaN.
LATE_NAN = "np.where(np.arange(32)[:, None] == 20, np.nan, np.ones((32, 4)))"


def write_module(tmp_path, name, width=8, learning_rate=0.01, features=SEEDED):
    path = tmp_path / f"{name}.py"
    path.write_text(
        MODULE.format(width=width, learning_rate=learning_rate, features=features)
    )
    sys.modules.pop(name, None)
    return str(path)


def run(tmp_path, module, model="build", data_fn=None, **settings):
    config = {
        "logdir": str(tmp_path / "run"),
        "model_fn": f"{module}:{model}",
        "data_fn": data_fn or f"{module}:data",
        "batch_size": 8,
        "checkpoint_every": 2,
        "histogram_every": 0,
        "export": False,
        "loss": "sparse_categorical_crossentropy",
        "from_logits": True,
        **settings,
    }
    out = io.StringIO()
    return train(config, handle_signals=False, stdout=out), out.getvalue()


# (name, module options, model function, what the report must say, what it must not)
NAN_CASES = [
    ("compiled model diverges", {"learning_rate": 1e30}, "build", r"lower learning rate or clipnorm in the optimizer model_fn \S+:build compiles with", r"norm_position|warmup_steps"),
    ("uncompiled model diverges", {}, "uncompiled", r"lower learning_rate, a warmup_steps warm-up or clipnorm; or look in the model", r"norm_position"),
    ("a NaN in a later batch", {"features": LATE_NAN}, "build", r"batch of step (\d+) holds NaN or Inf in its x: the data is at fault", r"Try a lower|norm_position"),
]  # fmt: skip


@pytest.mark.parametrize(
    "options, model, expected, unexpected",
    [pytest.param(*row[1:], id=row[0]) for row in NAN_CASES],
)
def test_the_nan_report_names_what_applies_to_the_users_model(
    tmp_path, options, model, expected, unexpected
):
    module = write_module(tmp_path, "diverging_" + model, **options)
    learning_rate = 1e30 if model == "uncompiled" else 1e-3
    summary, out = run(tmp_path, module, model, learning_rate=learning_rate)
    assert summary["status"] == "nan", out
    report = summary["nan_report"]
    found = re.search(expected, report)
    assert found, report
    assert not re.search(unexpected, report), report
    if found.groups():  # the step named is the step that stopped the run
        assert f"at step {found.group(1)};" in report
        assert int(found.group(1)) > 1  # past the probe's first batch


def resume_refused(tmp_path, first, second):
    """Trains `first` (module options), then resumes with `second`; returns
    the refusal."""
    run(tmp_path, write_module(tmp_path, "changing", **first))
    with pytest.raises(ConfigError) as refused:
        run(tmp_path, write_module(tmp_path, "changing", **second), epochs=2)
    return refused.value


UNSEEDED = "np.random.default_rng().normal(size=(32, 4))"

# (name, first module options, second, the key named, what the message must say)
RESUME_CASES = [
    ("wider layer", {"width": 8}, {"width": 12}, "model_fn", r"other weights \(\S*dense/kernel: shape \(4, 12\) float32 now, shape \(4, 8\) float32 then\)"),
    ("unseeded data", {"features": UNSEEDED}, {"features": UNSEEDED}, "data_fn", r"data_fn \S+:data returned other arrays than .*give it a fixed seed"),
]  # fmt: skip


@pytest.mark.parametrize(
    "first, second, key, expected",
    [pytest.param(*row[1:], id=row[0]) for row in RESUME_CASES],
)
def test_a_refused_resume_says_what_differs(tmp_path, first, second, key, expected):
    error = resume_refused(tmp_path, first, second)
    assert error.key == key
    assert re.search(expected, str(error)), str(error)
    assert "--data" not in str(error) and "vocabulary" not in str(error)


SHUFFLED = """
import numpy as np
import tensorflow as tf


def data():
    {before}
    x = np.ones((32, 4), "float32")
    pairs = tf.data.Dataset.from_tensor_slices((x, np.zeros(32, "int32")))
    return pairs{pipeline}.batch(8)
"""

UNSEEDED_WARNING = "warning: data_fn's training dataset shuffles without a seed"

# (name, code before the pipeline, the pipeline, whether the warning is due)
SHUFFLE_CASES = [
    ("unseeded shuffle", "", ".shuffle(32)", True),
    ("unseeded shuffle under a map", "", ".shuffle(32).map(lambda x, y: (x, y))", True),
    ("unseeded shuffle repeated", "", ".shuffle(32).repeat(2).take(32)", True),
    ("seeded shuffle", "", ".shuffle(32, seed=1)", False),
    ("seed 0", "", ".shuffle(32, seed=0)", False),
    ("global seed", "tf.random.set_seed(5)", ".shuffle(32)", False),
    ("no shuffle", "", "", False),
]  # fmt: skip


@pytest.mark.parametrize(
    "before, pipeline, warned",
    [pytest.param(*row[1:], id=row[0]) for row in SHUFFLE_CASES],
)
def test_an_unseeded_shuffle_is_warned_about_in_one_line_at_start(
    tmp_path, before, pipeline, warned
):
    model = write_module(tmp_path, "shuffled_model")
    (tmp_path / "shuffled_data.py").write_text(
        SHUFFLED.format(before=before, pipeline=pipeline)
    )
    sys.modules.pop("shuffled_data", None)
    # As in a fresh `tfnorm train` process: an earlier run's global seed
    # would seed this shuffle.
    tf.random.set_seed(None)
    data_fn = f"{tmp_path / 'shuffled_data.py'}:data"
    summary, out = run(tmp_path, model, data_fn=data_fn)
    assert summary["status"] == "completed"
    lines = [line for line in out.splitlines() if UNSEEDED_WARNING in line]
    assert len(lines) == (1 if warned else 0), out
    if warned:
        assert out.index(UNSEEDED_WARNING) < out.index("starting from step 0")

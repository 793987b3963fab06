"""The modules in `examples/` train through `tfnorm train` as the README shows.

Each runs a few steps of the README's command (in-process), then the run is
checked the way a user would look at it: exit 0, a finished summary, a
checkpoint, norm histograms, the whole model exported (its classes are
registered with Keras and have a config), and a rerun that resumes instead
of starting over. The README's showcase export also loads in a new process
by the line summary.json gives.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tfnorm._keras import IS_KERAS_3
from tfnorm.cli.main import main

EXAMPLES = os.path.join(REPO, "examples")
SHORT = ["--epochs", "1", "--steps-per-epoch", "4", "--histogram-every", "2"]


def example(name, *extra):
    path = os.path.join(EXAMPLES, name)
    return [
        "--model-fn", f"{path}:build_model", "--data-fn", f"{path}:load_data", *extra
    ]  # fmt: skip


def assert_loads_in_a_new_process(logdir):
    """The export's load line (summary.json) gives the model in a new Python."""
    check = (
        f"import json, numpy as np; exec(json.load(open({logdir!r} + '/summary.json'))"
        "['export']['load']); print(model(np.zeros((1, 32), 'int64')).shape)"
    )
    result = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "(1, 2)"


CASES = [
    pytest.param(example("keras_transformer_classifier.py"), id="keras-io-block"),
    pytest.param(
        example(
            "tfnorm_transformer_classifier.py",
            "--loss",
            "sparse_categorical_crossentropy",
            "--from-logits",
            "--warmup-steps",
            "2",
        ),  # fmt: skip
        id="tfnorm-subclassed-tf-data",
    ),
    pytest.param(
        example("keras_hub_classifier.py"),
        id="keras-hub-bert",
        marks=pytest.mark.skipif(
            not IS_KERAS_3 or importlib.util.find_spec("keras_hub") is None,
            reason="keras-hub needs Keras 3 and is installed in the keras3 runtime only",
        ),
    ),
]


@pytest.mark.parametrize("arguments", CASES)
def test_example_trains_in_the_background_command_and_resumes(
    tmp_path, capsys, arguments
):
    logdir = str(tmp_path / "run")
    # keras-hub's classes are its own concern, and its export the slowest.
    exports = "keras_hub" not in arguments[1]
    argv = ["train", *arguments, *SHORT, "--logdir", logdir]
    assert main(argv + ([] if exports else ["--no-export"])) == 0, (
        capsys.readouterr().err
    )
    summary = json.loads(open(os.path.join(logdir, "summary.json")).read())
    assert summary["status"] == "completed" and summary["final_step"] == 4
    if exports:
        assert summary["export"]["kind"] == "model", summary["export"]
    if "keras_transformer_classifier.py" in arguments[1]:
        assert_loads_in_a_new_process(logdir)
    assert glob.glob(os.path.join(logdir, "checkpoints", "ckpt-4.index"))
    assert glob.glob(os.path.join(logdir, "norms", "events.out.*"))
    capsys.readouterr()
    # the last flags win
    assert main([*argv, "--epochs", "2", "--no-export"]) == 0
    out = capsys.readouterr().out
    assert "resumed from step 4" in out and "status completed: step 8/8" in out

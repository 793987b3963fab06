"""The modules in `examples/` train through `tfnorm train` as the README shows.

Each runs a few steps of the README's command (in-process), then the run is
checked the way a user would look at it: exit 0, a finished summary, a
checkpoint, norm histograms, and a rerun that resumes instead of starting
over.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os

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
    argv = ["train", *arguments, *SHORT, "--logdir", logdir, "--no-export"]
    assert main(argv) == 0, capsys.readouterr().err
    summary = json.loads(open(os.path.join(logdir, "summary.json")).read())
    assert summary["status"] == "completed" and summary["final_step"] == 4
    assert glob.glob(os.path.join(logdir, "checkpoints", "ckpt-4.index"))
    assert glob.glob(os.path.join(logdir, "norms", "events.out.*"))
    capsys.readouterr()
    assert main([*argv, "--epochs", "2"]) == 0  # the last flag wins
    out = capsys.readouterr().out
    assert "resumed from step 4" in out and "status completed: step 8/8" in out

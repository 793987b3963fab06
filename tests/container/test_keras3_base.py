"""The README's other base: `BASE_IMAGE=tensorflow/tensorflow:2.16.1-gpu-jupyter`
(Keras 3, Python 3.11) builds with the same Dockerfile and trains.

The base is a stand-in (Debian bookworm's Python 3.11, CPU TensorFlow 2.16.1,
Jupyter at its release-week versions) built by tools/container/build-standins.sh.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.container.harness import Kernel, started_project

STANDIN = "tf216"  # tools/container/build-standins.sh


@pytest.fixture(scope="module")
def project(engine, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("tf216"))
    with started_project(root, STANDIN, "2.16.1-gpu-jupyter", "tfnormct216") as running:
        yield running


def test_keras3_image_builds_and_pip_check_passes(project):
    assert "No broken requirements" in project.exec("python3 -m pip check").stdout
    version = project.exec(
        "python3 -c 'import tensorflow as tf; print(tf.__version__)'"
    )
    assert version.stdout.split()[-1] == "2.16.1"


def test_tfnorm_imports_in_the_keras3_kernel(project):
    kernel = Kernel(project, "notebooks/01_quickstart.ipynb")
    try:
        _, outputs = kernel.execute(
            "import keras, tfnorm\n"
            "layer = tfnorm.RMSNorm()\n"
            "print(keras.version(), layer(keras.ops.ones((2, 8))).shape)"
        )
    finally:
        kernel.close()
    # stderr carries TensorFlow's start-up log lines.
    printed = "".join(
        output["text"] for output in outputs if output.get("name") == "stdout"
    ).split()
    assert printed[0].startswith("3.") and printed[-1] == "8)", printed


def _train_over_ssh(project, epochs):
    run = project.ssh(
        f"cd /workspace && tfnorm train --task sorted --epochs {epochs} "
        "--steps-per-epoch 20 --logdir runs/keras3",
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return json.loads(
        pathlib.Path(project.dir, "runs", "keras3", "summary.json").read_text()
    )


def test_a_20_step_training_over_ssh_completes_and_resumes(project):
    summary = _train_over_ssh(project, epochs=1)
    assert summary["status"] == "completed" and summary["final_step"] == 20, summary
    # The base's Keras 3.0 optimizers are not trackable by tf.train.Checkpoint
    # themselves: the run's checkpoint must still hold their state.
    summary = _train_over_ssh(project, epochs=2)
    assert summary["resumed_from_step"] == 20, summary
    assert summary["status"] == "completed" and summary["final_step"] == 40, summary

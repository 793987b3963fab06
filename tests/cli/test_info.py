from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import RUNTIME
from tfnorm import _keras


def _tfnorm(*args):
    script = os.path.join(os.path.dirname(sys.executable), "tfnorm")
    result = subprocess.run(
        [script, *args], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_info_reports_versions_flavour_devices_and_strategy():
    info = json.loads(_tfnorm("info", "--json"))
    assert info["python"] == ".".join(map(str, sys.version_info[:3]))
    assert info["tensorflow"] == _keras.tf.__version__
    assert info["keras"] == _keras.KERAS_VERSION
    assert (
        info["keras_flavour"]
        == {"keras3": "keras3", "legacy": "tf_keras", "tf29": "keras2"}[RUNTIME]
    )
    assert info["cpus"] and info["gpus"] == []
    assert info["strategy"]


def test_info_plain_text_lists_the_same_fields():
    text = _tfnorm("info")
    for key in ("python", "tensorflow", "keras_flavour", "gpus", "strategy"):
        assert key in text


def test_help_lists_subcommands():
    assert "info" in _tfnorm("--help")

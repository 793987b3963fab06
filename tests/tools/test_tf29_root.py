"""The tf29 runtime's root: real TensorFlow 2.9 under Python 3.9, and no
mount left behind, even when the command run inside fails."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import REPO, RUNTIME

SCRIPT = os.path.join(REPO, "tools", "tf29-root.sh")
ROOT = os.path.join(
    os.environ.get("TFNORM_CACHE", os.path.expanduser("~/.cache/tfnorm")), "tf29-root"
)

pytestmark = pytest.mark.skipif(
    RUNTIME == "tf29" or os.geteuid() != 0 or not shutil.which("chroot"),
    reason="needs root and chroot on the host (inside the tf29 root the root "
    "cannot start itself)",
)


def _mounts_under_root():
    with open("/proc/mounts") as handle:
        return [line for line in handle if f" {ROOT}/" in line or f" {ROOT} " in line]


def _run(*command):
    return subprocess.run(
        [SCRIPT, "run", *command], capture_output=True, text=True, timeout=1800
    )


def test_runs_real_tensorflow_2_9_under_python_3_9():
    result = _run(
        "python",
        "-c",
        "import sys, tensorflow as tf; print(sys.version_info[:2], tf.__version__, "
        "tf.keras.__version__)",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-3:] == ["9)", "2.9.3", "2.9.0"], result.stdout
    assert _mounts_under_root() == []


def test_failing_command_keeps_its_status_and_unmounts_everything():
    result = _run("sh", "-c", "test -d /src/tfnorm && exit 3")
    assert result.returncode == 3, result.stderr
    assert _mounts_under_root() == []

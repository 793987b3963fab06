"""docker/healthcheck.sh against a running entrypoint, and with its services gone."""

from __future__ import annotations

import os
import subprocess

from tests.conftest import REPO
from tests.docker.harness import free_port

HEALTHCHECK = os.path.join(REPO, "docker", "healthcheck.sh")


def test_healthcheck_reports_healthy_and_unhealthy(lab, tmp_path):
    env = dict(
        os.environ,
        JUPYTER_PORT=str(lab.jupyter_port),
        TFNORM_RUNTIME_DIR=lab.runtime_dir,
    )
    healthy = subprocess.run([HEALTHCHECK], env=env, capture_output=True, text=True)
    assert healthy.returncode == 0, healthy.stderr
    closed = dict(env, JUPYTER_PORT=str(free_port()))
    down = subprocess.run([HEALTHCHECK], env=closed, capture_output=True, text=True)
    assert down.returncode == 1 and "no answer" in down.stderr
    # sshd gone (its pid file names a process that has exited).
    finished = subprocess.Popen(["true"])
    finished.wait()
    (tmp_path / "sshd.pid").write_text(f"{finished.pid}\n")
    no_sshd = dict(env, TFNORM_RUNTIME_DIR=str(tmp_path))
    dead = subprocess.run([HEALTHCHECK], env=no_sshd, capture_output=True, text=True)
    assert dead.returncode == 1 and "sshd" in dead.stderr

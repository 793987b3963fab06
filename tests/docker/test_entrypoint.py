"""docker/entrypoint.py as the image runs it: services or a command, as the user.

A throw-away user stands in for the image's non-root user (tests/docker/harness.py):
the entrypoint is started as root (as with `docker run -u 0`) and must drop
to it, or with a command, which must take the entrypoint's place.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.docker.harness import ENTRYPOINT, cmdline


def test_a_command_replaces_the_services_and_runs_as_the_user(user):
    """`command:` in compose (tensorboard, workers) runs as the user, no token."""
    process = subprocess.Popen(
        [sys.executable, ENTRYPOINT, "sh", "-c", "id -un; env; echo pid=$$"],
        env={
            "PATH": "/usr/bin:/bin",
            "TFNORM_USER": user.name,
            "TFNORM_RUNTIME_DIR": os.path.join(user.base, "run"),
            "TFNORM_SSH_HOST_KEY_DIR": os.path.join(user.base, "hostkeys"),
            "JUPYTER_TOKEN": "not-for-children",
            "TF_FORCE_GPU_ALLOW_GROWTH": "true",
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    lines = stdout.splitlines()
    assert lines[0] == user.name
    assert f"HOME={user.home}" in lines and "TF_FORCE_GPU_ALLOW_GROWTH=true" in lines
    assert "not-for-children" not in stdout
    # The command took the entrypoint's place (exec), so tini's signals reach
    # it directly rather than a supervisor in between.
    assert lines[-1] == f"pid={process.pid}"


def test_services_run_as_the_user_never_as_root(lab):
    assert "dropped root privileges" in lab.read_log()
    assert os.stat(f"/proc/{lab.process.pid}").st_uid == lab.user.uid
    services = {
        pid: cmdline(pid)
        for pid in lab.user.processes()
        if "jupyter-lab" in cmdline(pid) or "sshd" in cmdline(pid)
    }
    names = " ".join(services.values())
    assert f"--ServerApp.port={lab.jupyter_port}" in names
    assert f"--ServerApp.root_dir={lab.user.workspace}" in names
    assert "sshd" in names
    assert all(os.stat(f"/proc/{pid}").st_uid == lab.user.uid for pid in services)

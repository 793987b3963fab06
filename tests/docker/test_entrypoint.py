"""docker/entrypoint.py as the image runs it: services or a command, as the user.

A throw-away user stands in for the image's non-root user (tests/docker/harness.py):
the entrypoint is started as root (as with `docker run -u 0`) and must drop
to it, or with a command, which must take the entrypoint's place.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.docker.harness import (
    ENTRYPOINT,
    NOT_UTF8_TF_VARIABLE,
    cmdline,
    failed_start,
    throwaway_user,
)


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


def test_values_that_are_not_utf8_are_skipped_with_one_line_each(lab):
    """The lab runs with a TF_* value and an SSH_AUTHORIZED_KEYS line that are
    not UTF-8 (tests/docker/harness.py): each is named once, and skipped."""
    log = lab.read_log()
    assert "Traceback" not in log
    assert log.count("SSH_AUTHORIZED_KEYS line 1 is not UTF-8 text; skipped") == 1
    assert (
        log.count(
            f"not passing {NOT_UTF8_TF_VARIABLE} to SSH sessions: its value is "
            "not UTF-8 text"
        )
        == 1
    )


@pytest.fixture(scope="module")
def spare_user(user):
    """A second throw-away user: a failing start must not touch the shared
    `lab`'s processes, whatever the code under test does."""
    with throwaway_user() as account:
        yield account


# A setting the services need that is wrong: (variable, value, what the one
# line says). `{base}` is the spare user's folder.
UNUSABLE_SETTINGS = [
    ("TFNORM_WORKSPACE", "{base}/missing", "must be an existing directory"),
    ("TFNORM_WORKSPACE", "{base}/a-file", "must be an existing directory"),
    ("TFNORM_WORKSPACE", "{base}/closed", "cannot be opened by"),
    ("TFNORM_JUPYTER", "{base}/no-jupyter", "must name a program"),
    ("TFNORM_SSHD", "/usr/sbin/no-sshd", "must name a program"),
    ("TFNORM_SSH_KEYGEN", "no-ssh-keygen", "must name a program"),
    ("TFNORM_SSHD_TEMPLATE", "{base}/no-template", "cannot be read"),
    ("TFNORM_SSHD_TEMPLATE", "{base}/template", "unknown placeholder ${motd}"),
]


@pytest.mark.parametrize("name, value, message", UNUSABLE_SETTINGS)
def test_what_the_services_need_is_checked_in_one_line_before_sshd_starts(
    spare_user, client_key, name, value, message
):
    """The real entrypoint, as root with a valid key: exit non-zero with one
    line naming the variable, no traceback, and neither service started."""
    base = spare_user.base
    calls = os.path.join(spare_user.workspace, "calls")
    service = os.path.join(base, "service.sh")
    with open(service, "w") as handle:
        # sshd is run once with -t (its config test) before it starts.
        handle.write(f'#!/bin/sh\necho "$*" >> {calls}\n[ "$1" = -t ] || sleep 30\n')
    os.chmod(service, 0o755)
    with open(os.path.join(base, "a-file"), "w"):
        pass
    os.makedirs(os.path.join(base, "closed"), mode=0o700, exist_ok=True)
    with open(os.path.join(base, "template"), "w") as handle:
        handle.write("Port ${port}\nBanner ${motd}\n")
    with open(client_key + ".pub") as handle:
        public_key = handle.read().strip()
    env = {
        "PATH": "/usr/bin:/bin",
        "TFNORM_USER": spare_user.name,
        "TFNORM_WORKSPACE": spare_user.workspace,
        "TFNORM_RUNTIME_DIR": os.path.join(base, "run"),
        "TFNORM_SSH_HOST_KEY_DIR": os.path.join(base, "hostkeys"),
        "TFNORM_AUTHORIZED_KEYS_FILE": os.path.join(base, "no-keys-file"),
        "SSH_AUTHORIZED_KEYS": public_key,
        "TFNORM_SSHD": service,
        "TFNORM_JUPYTER": service,
        "TFNORM_STOP_TIMEOUT": "5",
        name: value.format(base=base),
    }
    result = failed_start(env, timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    *log_lines, error = result.stderr.splitlines()
    assert all(line.startswith("[tfnorm-entrypoint] ") for line in log_lines)
    assert error.startswith(name) and message in error, result.stderr
    assert f"Received: {value.format(base=base)!r}" in error
    started = open(calls).read().splitlines() if os.path.exists(calls) else []
    assert [line for line in started if not line.startswith("-t ")] == []

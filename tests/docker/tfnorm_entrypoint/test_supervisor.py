"""docker/tfnorm_entrypoint/supervisor.py: `docker stop` reaches every process
of the user, and a service that dies takes the container down (non-zero)."""

from __future__ import annotations

import os
import signal
import socket
import time

import pytest

from tests.docker.harness import Entrypoint, cmdline, http_status, ssh


def test_sigterm_stops_every_process_of_the_user(lab, client_key):
    started = ssh(lab, client_key, "{ nohup sleep 600 > /dev/null 2>&1 < /dev/null & }")
    assert started.returncode == 0, started.stderr
    # The backgrounded child may still be the forked shell, not yet `sleep`.
    deadline = time.monotonic() + 20
    while not any("sleep 600" in cmdline(pid) for pid in lab.user.processes()):
        assert time.monotonic() < deadline, "the background sleep never started"
        time.sleep(0.1)
    lab.process.send_signal(signal.SIGTERM)
    assert lab.process.wait(timeout=40) == 0, lab.read_log()
    left = {pid: cmdline(pid) for pid in lab.user.processes()}
    assert left == {}, left
    for port in (lab.ssh_port, lab.jupyter_port):
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_restart_as_the_user_keeps_host_keys_and_exits_nonzero_if_jupyter_dies(
    user, client_key, authorized_keys, latest_lab
):
    lab = latest_lab  # stopped already by the SIGTERM test unless run alone
    if lab.process.poll() is None:
        # Records its host key (under the alias every run shares).
        assert ssh(lab, client_key, "true").returncode == 0
    lab.stop()
    # A lost .pub (the private key is what counts) is no reason to fail.
    os.remove(os.path.join(lab.host_key_dir, "ssh_host_ed25519_key.pub"))
    again = Entrypoint(user, authorized_keys, token="", as_user=True)
    try:
        again.wait_ready()
        log = again.read_log()
        assert "dropped root privileges" not in log
        assert "generating SSH host key" not in log  # kept from the first run
        assert "ssh_host_ed25519_key.pub is missing or stale" in log
        assert "WARNING" not in log  # a generated token is long enough
        # A generated token, printed once, that JupyterLab accepts.
        assert log.count(f"token={again.token}") == 1
        assert http_status(again, "/api/status", again.token) == 200
        # The first run's known_hosts entry still matches: same fingerprint.
        result = ssh(again, client_key, "true", "-o", "StrictHostKeyChecking=yes")
        assert result.returncode == 0, result.stderr
        jupyter = [
            pid
            for pid in user.processes()
            if f"--ServerApp.port={again.jupyter_port}" in cmdline(pid)
        ]
        os.kill(jupyter[0], signal.SIGKILL)
        assert again.process.wait(timeout=40) != 0
        assert user.processes() == [], {p: cmdline(p) for p in user.processes()}
    finally:
        again.stop()

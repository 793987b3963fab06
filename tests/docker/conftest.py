"""Fixtures for the container checks (no Docker engine needed).

The Docker files do not depend on the Keras runtime, so they are validated by
the keras3 run. In the legacy run these tests would only repeat it and are
skipped; in the tf29 root the host tools (hadolint, compose, sshd, chromium)
do not exist and each test skips naming the tool it lacks.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest

from tests.conftest import REPO, RUNTIME
from tests.docker.harness import (
    SSHD,
    Entrypoint,
    require_sbin,
    require_tool,
    throwaway_user,
)

HERE = os.path.dirname(os.path.abspath(__file__))
# The image runs docker/entrypoint.py, which imports its modules from the
# folder it is in (docker/tfnorm_entrypoint/): the tests import them the same way.
DOCKER_DIR = os.path.join(REPO, "docker")
if DOCKER_DIR not in sys.path:
    sys.path.append(DOCKER_DIR)


def pytest_collection_modifyitems(config, items):
    if RUNTIME != "legacy":
        return
    skip = pytest.mark.skip(
        reason="runtime-independent: the container files and entrypoint do not "
        "use Keras; the keras3 run (make test) validates them"
    )
    for item in items:
        if str(item.fspath).startswith(HERE + os.sep):
            item.add_marker(skip)


# --- a throw-away user and the entrypoint running on this host ---------------


@pytest.fixture(scope="session")
def user():
    if os.geteuid() != 0:
        pytest.skip("needs root: creates a test user and drops privileges to it")
    require_sbin(SSHD, "install openssh-server (tools/apt-packages.txt)")
    require_tool("useradd", "install passwd")
    require_tool("jupyter", "install jupyterlab (dev extra)")
    with throwaway_user() as account:
        yield account


@pytest.fixture(scope="session")
def client_key(user):
    key = os.path.join(user.base, "client_ed25519")
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", key],
        check=True,
    )
    return key


# A line sshd could not use, between a comment and the client's key.
MALFORMED_KEY_LINE = "ssh-ed25519 not-base64!! a-broken-paste"


@pytest.fixture(scope="session")
def authorized_keys(client_key):
    """The mounted authorized_keys: a comment, a malformed line, the client key."""
    path = client_key + ".authorized_keys"
    with open(client_key + ".pub") as handle:
        public_key = handle.read()
    with open(path, "w") as handle:
        handle.write(f"# the test client\n{MALFORMED_KEY_LINE}\n{public_key}")
    return path


@pytest.fixture(scope="session")
def _labs():
    started = []
    yield started
    for lab in started:
        lab.stop()


def _start_lab(labs, user, authorized_keys):
    labs.append(Entrypoint(user, authorized_keys, token=secrets.token_hex(16)))
    labs[-1].wait_ready()


@pytest.fixture
def lab(_labs, user, authorized_keys):
    """The entrypoint started as root with a fixed token, so it must drop to
    the user. Tests share it until one stops it; the next one starts another
    (same user and host keys)."""
    if not _labs or _labs[-1].process.poll() is not None:
        _start_lab(_labs, user, authorized_keys)
    return _labs[-1]


@pytest.fixture
def latest_lab(_labs, user, authorized_keys):
    """The latest `lab`, running or already stopped (its host keys stay);
    started only if none has run yet."""
    if not _labs:
        _start_lab(_labs, user, authorized_keys)
    return _labs[-1]

"""Host tools for the container checks, and docker/entrypoint.py run for real
on this host: a throw-away user, the entrypoint's runs, the SSH and HTTP
clients the tests use.

Paths point into a temporary directory and services listen on free ports of
127.0.0.1. The throw-away user stands in for the image's non-root user.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pytest

from tests.conftest import REPO, RUNTIME

ENTRYPOINT = os.path.join(REPO, "docker", "entrypoint.py")
SSHD = "/usr/sbin/sshd"
# Stands in for CUDA's library path, to see it reach SSH sessions.
FAKE_LD_LIBRARY_PATH = "/usr/local/cuda/lib64:/usr/local/nvidia/lib64"
# A passed-through variable whose value is not UTF-8 text.
NOT_UTF8_TF_VARIABLE = "TF_NOT_UTF8_VALUE"


def find_tool(name):
    """A tool from this interpreter's bin directory (the venv) or PATH."""
    local = os.path.join(os.path.dirname(sys.executable), name)
    if os.access(local, os.X_OK):
        return local
    return shutil.which(name)


def require_tool(name, hint):
    path = find_tool(name)
    if path is None:
        pytest.skip(
            f"{name} is not installed in this runtime ({RUNTIME}); {hint}. The "
            "container files are validated by the keras3 run (make test)."
        )
    return path


def require_module(name, distribution):
    try:
        return importlib.import_module(name)
    except ImportError:
        pytest.skip(
            f"{distribution} is not installed in this runtime ({RUNTIME}); install "
            f"{distribution} (dev extra). The container files are validated by "
            "the keras3 run (make test)."
        )


def require_sbin(path, hint):
    if not os.access(path, os.X_OK):
        pytest.skip(
            f"{path} is not installed in this runtime ({RUNTIME}); {hint}. The "
            "container files are validated by the keras3 run (make test)."
        )
    return path


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HostUser:
    """A throw-away account standing in for the image's non-root user."""

    def __init__(self, base):
        self.name = "tfnt" + secrets.token_hex(4)
        self.base = base
        self.home = os.path.join(base, "home")
        self.workspace = os.path.join(base, "workspace")
        self.acl_paths = []

    @property
    def uid(self):
        return pwd.getpwnam(self.name).pw_uid

    @property
    def gid(self):
        return pwd.getpwnam(self.name).pw_gid

    def create(self):
        subprocess.run(
            ["useradd", "--no-create-home", "--home-dir", self.home]
            + ["--shell", "/bin/bash", "--user-group", self.name],
            check=True,
        )
        # The image's layout: a home, and /workspace with its three folders.
        folders = ["notebooks", "data", "runs"]
        for directory in [self.home, self.workspace] + [
            os.path.join(self.workspace, folder) for folder in folders
        ]:
            os.makedirs(directory)
            os.chown(directory, self.uid, self.gid)
        # The user must reach this interpreter and the repository (e.g. a
        # venv whose Python lives under /root): grant traversal where missing.
        for target in (os.path.realpath(sys.executable), REPO):
            directory = os.path.dirname(target)
            while directory not in ("/", ""):
                if not os.stat(directory).st_mode & stat.S_IXOTH:
                    setfacl = require_tool("setfacl", "install acl")
                    subprocess.run(
                        [setfacl, "-m", f"u:{self.name}:x", directory], check=True
                    )
                    self.acl_paths.append(directory)
                directory = os.path.dirname(directory)

    def processes(self):
        """PIDs of this user's live (non-zombie) processes."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.stat(f"/proc/{entry}").st_uid != self.uid:
                    continue
                with open(f"/proc/{entry}/stat") as handle:
                    if handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                        continue
            except (OSError, IndexError):
                continue
            found.append(int(entry))
        return found

    def remove(self):
        try:
            uid = self.uid
        except KeyError:
            return
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        deadline = time.monotonic() + 10
        while self.processes() and time.monotonic() < deadline:
            time.sleep(0.1)
        setfacl = find_tool("setfacl")
        for directory in self.acl_paths:
            subprocess.run([setfacl, "-x", f"u:{uid}", directory], check=False)
        subprocess.run(["userdel", self.name], check=False)


@contextlib.contextmanager
def throwaway_user():
    """A `HostUser` created for the tests, removed with its folder afterwards."""
    base = tempfile.mkdtemp(prefix="tfnorm-docker-")
    # The user must reach its home and workspace inside.
    os.chmod(base, 0o755)
    account = HostUser(base)
    try:
        account.create()
        yield account
    finally:
        account.remove()
        shutil.rmtree(base, ignore_errors=True)


def failed_start(env, timeout):
    """Runs the real entrypoint with `env` alone, expecting it to stop
    before starting anything; returns the finished process."""
    result = subprocess.run(
        [sys.executable, ENTRYPOINT],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode != 0, result.stderr
    return result


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Entrypoint:
    """One run of docker/entrypoint.py with its ports, paths and log."""

    def __init__(self, user, authorized_keys, token="", as_user=False):
        self.user = user
        self.token = token
        self.ssh_port = free_port()
        self.jupyter_port = free_port()
        self.runtime_dir = os.path.join(user.base, "run")
        self.host_key_dir = os.path.join(user.base, "hostkeys")
        self.log_path = os.path.join(user.base, f"entrypoint-{self.jupyter_port}.log")
        venv_bin = os.path.dirname(sys.executable)
        self.env = {
            "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "LD_LIBRARY_PATH": FAKE_LD_LIBRARY_PATH,
            "TF_FORCE_GPU_ALLOW_GROWTH": "true",
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "CUDA_VISIBLE_DEVICES": "",
            "TFNORM_USER": user.name,
            "TFNORM_WORKSPACE": user.workspace,
            "TFNORM_RUNTIME_DIR": self.runtime_dir,
            "TFNORM_SSH_HOST_KEY_DIR": self.host_key_dir,
            "TFNORM_AUTHORIZED_KEYS_FILE": authorized_keys,
            "SSH_PORT": str(self.ssh_port),
            "SSH_LISTEN_ADDRESS": "127.0.0.1",
            "JUPYTER_IP": "127.0.0.1",
            "JUPYTER_PORT": str(self.jupyter_port),
            "JUPYTER_TOKEN": token,
            "TFNORM_STOP_TIMEOUT": "20",
            # Bytes that are not UTF-8 (a Latin-1 "é"), as a user's shell may
            # pass them: each skipped with a log line, never a traceback.
            NOT_UTF8_TF_VARIABLE: "caf\udce9",
            "SSH_AUTHORIZED_KEYS": "ssh-ed25519 caf\udce9",
        }
        if as_user:
            self.env.update(HOME=user.home, USER=user.name)
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, ENTRYPOINT],
            env=self.env,
            cwd=user.workspace,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            user=user.uid if as_user else None,
            group=user.gid if as_user else None,
            extra_groups=[] if as_user else None,
        )

    def read_log(self):
        with open(self.log_path) as handle:
            return handle.read()

    def wait_ready(self, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"entrypoint exited:\n{self.read_log()}")
            if self.token and http_status(self, "/api/status", self.token) == 200:
                return
            if not self.token and "lab?token=" in self.read_log():
                self.token = re.search(r"lab\?token=(\w+)", self.read_log()).group(1)
                continue
            time.sleep(0.5)
        raise AssertionError(f"JupyterLab not ready in {timeout}s:\n{self.read_log()}")

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()


def http_status(lab, path, token=None, query_token=False):
    url = f"http://127.0.0.1:{lab.jupyter_port}{path}"
    headers = {}
    if token and query_token:
        url += f"?token={token}"
    elif token:
        headers["Authorization"] = f"token {token}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as r:
            return r.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def ssh(lab, client_key, command, *options, timeout=60):
    """`command` over SSH as the user. Every run of the entrypoint shares one
    known_hosts entry (an alias, not host:port), so a changed host key fails.
    `options` come first: ssh keeps the first value it gets for each."""
    arguments = [
        require_tool("ssh", "install openssh-client (tools/apt-packages.txt)"),
        *options,
        "-p",
        str(lab.ssh_port),
        "-o",
        "BatchMode=yes",
        "-o",
        f"UserKnownHostsFile={lab.user.base}/known_hosts",
        "-o",
        "HostKeyAlias=tfnorm-entrypoint",
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-o",
        "ConnectTimeout=10",
        "-F",
        "/dev/null",
    ]
    if client_key:
        arguments += ["-i", client_key, "-o", "IdentitiesOnly=yes"]
    return subprocess.run(
        arguments + [f"{lab.user.name}@127.0.0.1", command],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def run_command_as_root(user, workspace, command="id -un", runtime_dir=None):
    """The entrypoint started as root (`docker run -u 0`) with a command."""
    result = subprocess.run(
        [sys.executable, ENTRYPOINT, "sh", "-c", command],
        env={
            "PATH": "/usr/bin:/bin",
            "TFNORM_USER": user.name,
            "TFNORM_WORKSPACE": workspace,
            "TFNORM_RUNTIME_DIR": runtime_dir or os.path.join(user.base, "run"),
            "TFNORM_SSH_HOST_KEY_DIR": os.path.join(user.base, "hostkeys"),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result

"""docker/entrypoint.py, run for real on this host.

Paths point into a temporary directory and services listen on free ports of
127.0.0.1. A throw-away user stands in for the image's non-root user: the
entrypoint is started as root (as with `docker run -u 0`) and must drop to it,
then started again directly as that user (the image's default `USER`). A real
OpenSSH client logs in with a generated ed25519 key, starts a background
`tfnorm train` and disconnects; JupyterLab is queried over HTTP and opened in
headless Chromium; SIGTERM must stop every process of the user.
"""

from __future__ import annotations

import json
import os
import pathlib
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

from tests.conftest import REPO
from tests.docker.conftest import (
    CHROMIUM,
    find_tool,
    free_port,
    jupyterlab_screenshot,
    require_sbin,
    require_tool,
)

SSHD = "/usr/sbin/sshd"

HEALTHCHECK = os.path.join(REPO, "docker", "healthcheck.sh")
# Stands in for CUDA's library path, to see it reach SSH sessions.
FAKE_LD_LIBRARY_PATH = "/usr/local/cuda/lib64:/usr/local/nvidia/lib64"


# --- pure functions of the entrypoint (no services) -------------------------


def test_session_environment_keeps_tf_and_cuda_settings_and_drops_secrets(
    entrypoint,
):
    environ = {
        "PATH": "/usr/local/bin:/usr/bin",
        "LD_LIBRARY_PATH": FAKE_LD_LIBRARY_PATH,
        "CUDA_CACHE_PATH": "/var/cache/cuda",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
        "TF_CONFIG": '{"cluster": {}}',  # quotes cannot pass through SetEnv
        "JUPYTER_TOKEN": "secret-token",
        "TF_API_TOKEN": "another-secret",
        "SSH_AUTHORIZED_KEYS": "ssh-ed25519 AAAA",
        "HOSTNAME": "box",
        "MY_VAR": "x",
    }
    selected = entrypoint.session_environment(environ, extra_names=["MY_VAR"])
    assert selected == {
        "CUDA_CACHE_PATH": "/var/cache/cuda",
        "LD_LIBRARY_PATH": FAKE_LD_LIBRARY_PATH,
        "MY_VAR": "x",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "PATH": "/usr/local/bin:/usr/bin",
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    }


def test_an_empty_token_is_replaced_by_a_generated_one(entrypoint):
    given = entrypoint.resolve_token(entrypoint.Settings({"JUPYTER_TOKEN": "abc"}))
    assert given == ("abc", False)
    first, generated = entrypoint.resolve_token(
        entrypoint.Settings({"JUPYTER_TOKEN": "  "})
    )
    second, _ = entrypoint.resolve_token(entrypoint.Settings({}))
    assert generated and len(first) >= 32 and first != second


def test_invalid_settings_name_the_variable_and_the_value(entrypoint):
    with pytest.raises(SystemExit, match=r"JUPYTER_PORT.*Received: 'http'"):
        entrypoint.Settings({"JUPYTER_PORT": "http"})
    with pytest.raises(SystemExit, match=r"TFNORM_STOP_TIMEOUT.*Received: '-1'"):
        entrypoint.Settings({"TFNORM_STOP_TIMEOUT": "-1"})
    with pytest.raises(SystemExit, match=r"must not run as root.*TFNORM_USER='root'"):
        entrypoint.drop_privileges(entrypoint.Settings({"TFNORM_USER": "root"}))


def test_authorized_keys_come_from_the_file_and_the_variable(entrypoint, tmp_path):
    mounted = tmp_path / "authorized_keys"
    mounted.write_text("# laptop\nssh-ed25519 AAAAone me@laptop\n\n")
    settings = entrypoint.Settings(
        {
            "TFNORM_AUTHORIZED_KEYS_FILE": str(mounted),
            "SSH_AUTHORIZED_KEYS": "ssh-ed25519 AAAAtwo ci\\nssh-ed25519 AAAAone me@laptop",
        }
    )
    assert entrypoint.read_authorized_keys(settings) == [
        "ssh-ed25519 AAAAone me@laptop",
        "ssh-ed25519 AAAAtwo ci",
    ]
    mounted.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    with pytest.raises(SystemExit, match="public key"):
        entrypoint.read_authorized_keys(settings)


def test_without_a_public_key_sshd_is_not_started_and_the_log_says_why(
    entrypoint, tmp_path, capsys
):
    settings = entrypoint.Settings(
        {
            "TFNORM_AUTHORIZED_KEYS_FILE": str(tmp_path / "missing"),
            "TFNORM_RUNTIME_DIR": str(tmp_path / "run"),
            "TFNORM_SSHD": "/bin/false",  # would fail loudly if it were run
        }
    )
    assert entrypoint.start_sshd(settings, {"HOME": str(tmp_path)}) is None
    message = capsys.readouterr().err
    assert "SSH is disabled" in message and "SSH_AUTHORIZED_KEYS" in message
    assert not (tmp_path / ".ssh").exists()


def test_host_keys_are_generated_once_and_kept(entrypoint, tmp_path):
    require_tool("ssh-keygen", "install openssh-client (tools/apt-packages.txt)")
    settings = entrypoint.Settings({"TFNORM_SSH_HOST_KEY_DIR": str(tmp_path / "k")})
    first = entrypoint.ensure_host_keys(settings)
    contents = [open(path).read() for path in first]
    assert entrypoint.ensure_host_keys(settings) == first
    assert [open(path).read() for path in first] == contents
    assert {stat.S_IMODE(os.stat(path).st_mode) for path in first} == {0o600}


# --- the entrypoint running on this host ------------------------------------


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


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Entrypoint:
    """One run of docker/entrypoint.py with its ports, paths and log."""

    def __init__(self, user, client_key, token="", as_user=False):
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
            "TFNORM_AUTHORIZED_KEYS_FILE": client_key + ".pub",
            "SSH_PORT": str(self.ssh_port),
            "SSH_LISTEN_ADDRESS": "127.0.0.1",
            "JUPYTER_IP": "127.0.0.1",
            "JUPYTER_PORT": str(self.jupyter_port),
            "JUPYTER_TOKEN": token,
            "TFNORM_STOP_TIMEOUT": "20",
        }
        if as_user:
            self.env.update(HOME=user.home, USER=user.name)
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(REPO, "docker", "entrypoint.py")],
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
    base = [
        require_tool("ssh", "install openssh-client (tools/apt-packages.txt)"),
        "-p",
        str(lab.ssh_port),
        "-o",
        "BatchMode=yes",
        "-o",
        f"UserKnownHostsFile={lab.user.base}/known_hosts",
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-o",
        "ConnectTimeout=10",
        "-F",
        "/dev/null",
    ]
    if client_key:
        base += ["-i", client_key, "-o", "IdentitiesOnly=yes"]
    return subprocess.run(
        base + list(options) + [f"{lab.user.name}@127.0.0.1", command],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def user():
    if os.geteuid() != 0:
        pytest.skip("needs root: creates a test user and drops privileges to it")
    require_sbin(SSHD, "install openssh-server (tools/apt-packages.txt)")
    require_tool("useradd", "install passwd")
    require_tool("jupyter", "install jupyterlab (dev extra)")
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


@pytest.fixture(scope="module")
def client_key(user):
    key = os.path.join(user.base, "client_ed25519")
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", key],
        check=True,
    )
    return key


@pytest.fixture(scope="module")
def lab(user, client_key):
    """Started as root with a fixed token, so it must drop to the user."""
    running = Entrypoint(user, client_key, token=secrets.token_hex(16))
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def test_a_command_replaces_the_services_and_runs_as_the_user(user):
    """`command:` in compose (tensorboard, workers) runs as the user, no token."""
    process = subprocess.Popen(
        [sys.executable, os.path.join(REPO, "docker", "entrypoint.py")]
        + ["sh", "-c", "id -un; env; echo pid=$$"],
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


def run_command_as_root(user, workspace, command="id -un"):
    """The entrypoint started as root (`docker run -u 0`) with a command."""
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "docker", "entrypoint.py")]
        + ["sh", "-c", command],
        env={
            "PATH": "/usr/bin:/bin",
            "TFNORM_USER": user.name,
            "TFNORM_WORKSPACE": workspace,
            "TFNORM_RUNTIME_DIR": os.path.join(user.base, "run"),
            "TFNORM_SSH_HOST_KEY_DIR": os.path.join(user.base, "hostkeys"),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result


def test_a_root_start_never_hands_a_linked_file_to_the_user(user, tmp_path):
    """The attack: from a shell of the user, plant links to a root-only file in
    the directories a root start prepares, then wait for the next start."""
    secret = tmp_path / "shadow"
    secret.write_text("root only\n")
    os.chmod(secret, 0o600)
    os.chmod(tmp_path, 0o755)
    planted = []
    for directory in ("hostkeys", "run"):
        folder = os.path.join(user.base, directory)
        os.makedirs(folder, exist_ok=True)
        os.chown(folder, user.uid, user.gid)
        planted.append(os.path.join(folder, "x"))
    nested = os.path.join(user.base, "hostkeys", "sub")
    os.makedirs(nested, exist_ok=True)
    planted.append(os.path.join(nested, "y"))
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    planted.append(str(workspace / "runs"))  # a mount point replaced by a link
    for link in planted:
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(secret, link)
        os.lchown(link, user.uid, user.gid)
    try:
        assert run_command_as_root(user, str(workspace)).stdout.strip() == user.name
        info = os.stat(secret)
        assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (0, 0, 0o600)
        assert secret.read_text() == "root only\n"
    finally:
        for link in planted:
            os.remove(link)


def test_a_root_start_hands_over_only_empty_engine_created_mounts(user):
    """A fresh clone has no runs/ or data/: the engine creates them empty and
    root-owned. Those become the user's; a folder with contents is left as
    it is, and the log says how to fix it."""
    # Under the user's base folder: the user must reach it (tmp_path is not).
    workspace = pathlib.Path(tempfile.mkdtemp(dir=user.base)) / "workspace"
    for name in ("notebooks", "data", "runs"):
        (workspace / name).mkdir(parents=True)
    (workspace / "notebooks" / "mine.ipynb").write_text("{}")
    for folder in (workspace.parent, workspace, workspace / "notebooks"):
        os.chmod(folder, 0o755)
    result = run_command_as_root(
        user, str(workspace), f"touch {workspace}/runs/r {workspace}/data/d"
    )
    assert os.stat(workspace / "runs").st_uid == user.uid
    assert os.stat(workspace / "data").st_uid == user.uid
    assert os.stat(workspace / "runs" / "r").st_uid == user.uid
    assert os.stat(workspace / "notebooks").st_uid == 0
    assert os.stat(workspace / "notebooks" / "mine.ipynb").st_uid == 0
    warning = [line for line in result.stderr.splitlines() if "WARNING" in line]
    assert len(warning) == 1, result.stderr
    assert str(workspace / "notebooks") in warning[0]
    assert f"chown -R {user.uid}:{user.gid}" in warning[0]
    assert "TFNORM_UID=0" in warning[0]


def test_jupyterlab_answers_with_the_token_and_refuses_without(lab):
    assert http_status(lab, "/api/status", lab.token) == 200
    assert http_status(lab, "/api/status", lab.token, query_token=True) == 200
    assert http_status(lab, "/api/status") == 403
    assert http_status(lab, "/api/status", "wrong" + lab.token) == 403


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


def test_the_token_is_in_no_command_line_and_no_environment(lab):
    # The entrypoint itself was given JUPYTER_TOKEN; none of its children is.
    pids = [pid for pid in lab.user.processes() if pid != lab.process.pid]
    assert len(pids) >= 2  # sshd, JupyterLab
    for pid in pids:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read().decode(errors="replace")
        assert lab.token not in environ and "JUPYTER_TOKEN" not in environ, pid
        assert lab.token not in cmdline(pid), pid
    config = os.path.join(lab.runtime_dir, "jupyter_token_config.json")
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o600


def test_key_login_works_and_passwords_are_refused(lab, client_key):
    result = ssh(lab, client_key, "id -un")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == lab.user.name
    for method in ("password", "keyboard-interactive"):
        refused = ssh(
            lab,
            None,
            "true",
            "-o",
            f"PreferredAuthentications={method}",
            "-o",
            "PubkeyAuthentication=no",
        )
        assert refused.returncode == 255, refused
        assert "Permission denied (publickey)" in refused.stderr


def test_effective_sshd_config_is_key_only(lab):
    config = os.path.join(lab.runtime_dir, "sshd_config")
    run_as_user = dict(user=lab.user.uid, group=lab.user.gid, extra_groups=[])
    checked = subprocess.run(
        [SSHD, "-t", "-f", config], capture_output=True, text=True, **run_as_user
    )
    assert checked.returncode == 0, checked.stderr
    effective = subprocess.run(
        [SSHD, "-T", "-f", config],
        capture_output=True,
        text=True,
        check=True,
        **run_as_user,
    ).stdout.splitlines()
    settings = dict(line.split(" ", 1) for line in effective if " " in line)
    assert settings["passwordauthentication"] == "no"
    assert settings["kbdinteractiveauthentication"] == "no"
    assert settings["permitrootlogin"] == "no"
    assert settings["permituserenvironment"] == "no"
    assert settings["pubkeyauthentication"] == "yes"
    assert settings["port"] == str(lab.ssh_port)
    assert settings["allowusers"] == lab.user.name


def test_authorized_keys_are_installed_private_to_the_user(lab, client_key):
    ssh_dir = os.path.join(lab.user.home, ".ssh")
    installed = os.path.join(ssh_dir, "authorized_keys")
    for path, mode in ((ssh_dir, 0o700), (installed, 0o600)):
        info = os.stat(path)
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (lab.user.uid, mode)
    with open(client_key + ".pub") as handle:
        assert open(installed).read().strip() == handle.read().strip()


def test_ssh_sessions_get_the_tf_environment_but_not_the_token(lab, client_key):
    result = ssh(lab, client_key, "env")
    assert result.returncode == 0, result.stderr
    session = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert session["PATH"] == lab.env["PATH"]
    assert session["LD_LIBRARY_PATH"] == FAKE_LD_LIBRARY_PATH
    assert session["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert session["TF_CPP_MIN_LOG_LEVEL"] == "2"
    assert "JUPYTER_TOKEN" not in session and lab.token not in result.stdout
    # Login shells source the same values from the profile.d hook's file.
    script = os.path.join(lab.runtime_dir, "session-env.sh")
    sourced = ssh(lab, client_key, f"env -i sh -c '. {script} && env'")
    assert sourced.returncode == 0, sourced.stderr
    assert f"LD_LIBRARY_PATH={FAKE_LD_LIBRARY_PATH}" in sourced.stdout
    assert f"PATH={lab.env['PATH']}" in sourced.stdout
    assert lab.token not in open(script).read()


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


def test_training_started_over_ssh_outlives_the_session(lab, client_key):
    run = os.path.join(lab.user.workspace, "runs", "ssh-train")
    train = (
        "tfnorm train --task sorted --num-layers 1 --d-model 16 --num-heads 2 "
        "--dff 32 --max-len 8 --num-examples 64 --epochs 1 --steps-per-epoch 3 "
        "--batch-size 8 "
        f"--seed 0 --logdir {run}/logs --checkpoint-dir {run}/checkpoints "
        f"--log-file {run}/train.log"
    )
    command = (
        f"mkdir -p {run} && cd {lab.user.workspace} && "
        f"{{ nohup {train} > {run}/nohup.out 2>&1 < /dev/null & }}"
    )
    started = time.monotonic()
    result = ssh(lab, client_key, command)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 20, "ssh waited for the run to finish"
    summary = os.path.join(run, "logs", "summary.json")
    # The session is over; the run goes on and finishes on its own.
    deadline = time.monotonic() + 240
    while not os.path.exists(summary) and time.monotonic() < deadline:
        time.sleep(1)
    output = open(os.path.join(run, "nohup.out")).read()
    assert os.path.exists(summary), f"no summary.json; the run printed:\n{output}"
    with open(summary) as handle:
        outcome = json.load(handle)
    assert (outcome["status"], outcome["final_step"]) == ("completed", 3), outcome
    checkpoints = os.listdir(os.path.join(run, "checkpoints"))
    assert [name for name in checkpoints if name.endswith(".index")], checkpoints
    events = [
        os.path.join(root, name)
        for root, _dirs, names in os.walk(os.path.join(run, "logs"))
        for name in names
        if name.startswith("events.out.tfevents")
    ]
    assert events, "no TensorBoard event file written"
    assert os.stat(summary).st_uid == lab.user.uid


def test_chromium_shows_the_jupyterlab_interface(lab, tmp_path):
    """Headless Chromium opens /lab with the token and takes a screenshot.

    Set TFNORM_SCREENSHOT_OUT=docs/jupyterlab.png to keep the picture.
    """
    require_sbin(CHROMIUM, "install chromium (tools/apt-packages.txt)")
    url = f"http://127.0.0.1:{lab.jupyter_port}/lab?token={lab.token}"
    # One browser run both prints the DOM after the app has loaded and saves
    # the screenshot (virtual time lets the page settle without a fixed wait).
    dom, png = jupyterlab_screenshot(url, tmp_path, 1280, 800, 15000, timeout=120)
    assert "jp-Launcher" in dom  # the Lab UI rendered, not a login form
    assert "Jupyter news" not in dom  # the entrypoint's default settings
    # A blank or near-blank page compresses to a few kilobytes; Lab's UI
    # (toolbar, file browser, launcher icons) does not.
    assert len(png) > 25_000, f"the screenshot looks blank ({len(png)} bytes)"
    target = os.environ.get("TFNORM_SCREENSHOT_OUT")
    if target:
        shutil.copyfile(tmp_path / "jupyterlab.png", os.path.join(REPO, target))


def test_sigterm_stops_every_process_of_the_user(lab, client_key):
    started = ssh(lab, client_key, "{ nohup sleep 600 > /dev/null 2>&1 < /dev/null & }")
    assert started.returncode == 0, started.stderr
    assert any("sleep 600" in cmdline(pid) for pid in lab.user.processes())
    lab.process.send_signal(signal.SIGTERM)
    assert lab.process.wait(timeout=40) == 0, lab.read_log()
    left = {pid: cmdline(pid) for pid in lab.user.processes()}
    assert left == {}, left
    for port in (lab.ssh_port, lab.jupyter_port):
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_restart_as_the_user_keeps_host_keys_and_exits_nonzero_if_jupyter_dies(
    user, client_key, lab
):
    lab.stop()  # already stopped by the SIGTERM test unless run alone
    again = Entrypoint(user, client_key, token="", as_user=True)
    try:
        again.wait_ready()
        log = again.read_log()
        assert "dropped root privileges" not in log
        assert "generating SSH host key" not in log  # kept from the first run
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

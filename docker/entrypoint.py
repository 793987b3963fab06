#!/usr/bin/env python3
"""Entrypoint of the tfnorm GPU Jupyter container.

`entrypoint.py` (or `entrypoint.py lab`) runs the container's services as the
non-root workload user:

- **SSH** (key-only) when a public key is provided, through the read-only
  mount `TFNORM_AUTHORIZED_KEYS_FILE` or the `SSH_AUTHORIZED_KEYS` variable.
  Host keys are generated once into `TFNORM_SSH_HOST_KEY_DIR` (a volume, so
  fingerprints survive restarts). SSH sessions get the container's
  TensorFlow/CUDA environment (`PATH`, `LD_LIBRARY_PATH`, `CUDA_*`, `TF_*`, ...)
  but never the Jupyter token. Without a key, sshd is not started and the log
  says how to enable it.
- **JupyterLab** on `JUPYTER_PORT`, rooted at `TFNORM_WORKSPACE`, always with a
  token: `JUPYTER_TOKEN`, or a generated one printed once to the log.

`SIGTERM`/`SIGINT` (what `docker stop` sends through tini) are passed to every
process of the workload user (JupyterLab, its kernels, sshd, sessions and
background runs started over SSH); what is still alive after
`TFNORM_STOP_TIMEOUT` seconds is killed. If JupyterLab or sshd exits on its
own, the others are stopped and the entrypoint exits non-zero, so the
container's restart policy applies.

Any other command (`entrypoint.py tensorboard --logdir ...`) runs as the
workload user in place of the entrypoint.

Started as root (compose's one-shot `prepare` service, `docker run -u 0`, or a
test on a host), the entrypoint gives the runtime and host-key directories
themselves (never their entries) and empty root-owned workspace mount points
to `TFNORM_USER`, following no symbolic link, then drops to that user for
good; JupyterLab and sshd never run as root. A workspace folder the user
cannot write is named in the log with its fix.

Every path is an environment variable, so the same code runs on a host in
tests. Python 3.8 compatible (the 2.9 image's Python); standard library only.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shlex
import signal
import string
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# Environment variables passed on to SSH sessions (exact names or prefixes
# ending in "*"), unless their name looks like a secret.
SESSION_ENV_NAMES = (
    "PATH",
    "LD_LIBRARY_PATH",
    "LIBRARY_PATH",
    "PYTHONPATH",
    "CUDA_*",
    "NVIDIA_*",
    "NCCL_*",
    "TF_*",
    "XLA_FLAGS",
    "KERAS_BACKEND",
    "LANG",
    "LC_ALL",
    "TZ",
    # Where SSH logins start (/etc/profile.d/tfnorm-session-env.sh).
    "TFNORM_WORKSPACE",
)
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|AUTHORIZED_KEYS|PRIVATE", re.IGNORECASE)
# Variables only the entrypoint may read: children (JupyterLab, its kernels,
# commands) never see them.
ENTRYPOINT_ONLY = ("JUPYTER_TOKEN", "SSH_AUTHORIZED_KEYS")
HOST_KEY_TYPES = ("ed25519", "ecdsa")
WORKSPACE_FOLDERS = ("notebooks", "data", "runs")


def log(message):
    sys.stderr.write(f"[tfnorm-entrypoint] {message}\n")
    sys.stderr.flush()


class Settings:
    """Where things live and how services listen, read from the environment."""

    def __init__(self, environ):
        get = environ.get
        self.user = get("TFNORM_USER", "tfnorm")
        self.workspace = get("TFNORM_WORKSPACE", "/workspace")
        # Bind mounts of the host's folders (docker-compose.yml).
        self.workspace_mounts = [
            os.path.join(self.workspace, name) for name in WORKSPACE_FOLDERS
        ]
        self.runtime_dir = get("TFNORM_RUNTIME_DIR", "/run/tfnorm")
        self.host_key_dir = get("TFNORM_SSH_HOST_KEY_DIR", "/var/lib/tfnorm/ssh")
        self.authorized_keys_file = get(
            "TFNORM_AUTHORIZED_KEYS_FILE", "/etc/tfnorm/authorized_keys"
        )
        self.authorized_keys_env = get("SSH_AUTHORIZED_KEYS", "")
        self.sshd = get("TFNORM_SSHD", "/usr/sbin/sshd")
        self.ssh_keygen = get("TFNORM_SSH_KEYGEN", "ssh-keygen")
        self.sshd_template = get(
            "TFNORM_SSHD_TEMPLATE", os.path.join(HERE, "sshd_config.template")
        )
        self.ssh_port = _port(get("SSH_PORT", "22"), "SSH_PORT")
        self.ssh_listen_address = get("SSH_LISTEN_ADDRESS", "0.0.0.0")
        self.extra_session_env = get("TFNORM_SSH_ENV", "").split()
        self.jupyter = get("TFNORM_JUPYTER", "jupyter")
        self.jupyter_ip = get("JUPYTER_IP", "0.0.0.0")
        self.jupyter_port = _port(get("JUPYTER_PORT", "8888"), "JUPYTER_PORT")
        self.jupyter_token = get("JUPYTER_TOKEN", "")
        self.public_url = get(
            "TFNORM_PUBLIC_URL", f"http://127.0.0.1:{self.jupyter_port}"
        ).rstrip("/")
        self.stop_timeout = _seconds(get("TFNORM_STOP_TIMEOUT", "60"))

    @property
    def sshd_config(self):
        return os.path.join(self.runtime_dir, "sshd_config")

    @property
    def sshd_pid_file(self):
        return os.path.join(self.runtime_dir, "sshd.pid")

    @property
    def session_env_file(self):
        return os.path.join(self.runtime_dir, "session-env.sh")

    @property
    def jupyter_config(self):
        return os.path.join(self.runtime_dir, "jupyter_token_config.json")


def _port(value, name):
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 < port < 65536:
        raise SystemExit(f"{name} must be a port number 1-65535. Received: {value!r}")
    return port


def _seconds(value):
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if seconds < 0:
        raise SystemExit(
            f"TFNORM_STOP_TIMEOUT must be a number of seconds >= 0. Received: {value!r}"
        )
    return seconds


# --- user and privileges --------------------------------------------------


def drop_privileges(settings):
    """Started as root: prepare our directories, then become the user for good.

    Everything here runs as root inside directories the workload user can
    write (the host-key volume, the runtime directory, the workspace), so
    nothing follows a symbolic link and nothing but a directory itself ever
    changes owner: a link planted by the user (`ln -s /etc/shadow
    <host-key-dir>/x`) must never hand a root file to that user.
    """
    try:
        account = pwd.getpwnam(settings.user)
    except KeyError:
        raise SystemExit(
            "TFNORM_USER names no existing user. "
            f"Received: TFNORM_USER={settings.user!r}"
        ) from None
    if account.pw_uid == 0:
        raise SystemExit(
            "JupyterLab and sshd must not run as root; set TFNORM_USER to a "
            f"non-root user. Received: TFNORM_USER={settings.user!r}"
        )
    for directory in (settings.runtime_dir, settings.host_key_dir):
        _own_directory(directory, account, 0o700)
    for directory in settings.workspace_mounts:
        _claim_engine_created_mount(directory, account)
    os.initgroups(account.pw_name, account.pw_gid)
    os.setgid(account.pw_gid)
    os.setuid(account.pw_uid)
    log(f"dropped root privileges: running as {account.pw_name} ({account.pw_uid})")


def _open_directory(path):
    """A descriptor of `path` if it is a real directory (never via a link)."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None


def _own_directory(path, account, mode):
    """The directory itself belongs to the user with `mode`; its entries are
    left alone (the user created them)."""
    os.makedirs(path, exist_ok=True)
    descriptor = _open_directory(path)
    if descriptor is None:
        raise SystemExit(
            f"{path} is not a directory (a symbolic link?); remove it and restart"
        )
    try:
        if os.fstat(descriptor).st_uid != account.pw_uid:
            os.fchown(descriptor, account.pw_uid, account.pw_gid)
        os.fchmod(descriptor, mode)
    finally:
        os.close(descriptor)


def _claim_engine_created_mount(path, account):
    """Hands an empty, root-owned mount point to the user.

    Docker and Podman create a missing bind-mount source (`./runs` in a fresh
    clone) as an empty root-owned directory, which the user could not write.
    Only that case is changed: a directory with contents belongs to someone
    on the host, and `warn_unwritable_mounts` says how to fix it.
    """
    descriptor = _open_directory(path)
    if descriptor is None:
        return
    try:
        info = os.fstat(descriptor)
        if info.st_uid != 0 or os.listdir(descriptor) or _read_only(descriptor):
            return
        os.fchown(descriptor, account.pw_uid, account.pw_gid)
        log(f"{path}: empty and owned by root; handed to {account.pw_name}")
    finally:
        os.close(descriptor)


def _read_only(descriptor):
    return bool(os.fstatvfs(descriptor).f_flag & os.ST_RDONLY)


def warn_unwritable_mounts(settings):
    """Says in the log which workspace folder the user cannot write, and the fix."""
    account = current_account()
    for path in settings.workspace_mounts:
        descriptor = _open_directory(path)
        if descriptor is None:
            continue
        try:
            if _read_only(descriptor) or os.access(path, os.W_OK):
                continue
            owner = os.fstat(descriptor).st_uid
        finally:
            os.close(descriptor)
        log(
            f"WARNING: {path} is not writable by {account.pw_name} (uid "
            f"{account.pw_uid}); it belongs to uid {owner}. Fix on the host: "
            f"`sudo chown -R {account.pw_uid}:{account.pw_gid}` on the folder "
            f"mounted there, or set TFNORM_UID={owner} (and TFNORM_GID) in .env "
            "and `docker compose build` (see README, troubleshooting)"
        )


def current_account():
    try:
        return pwd.getpwuid(os.getuid())
    except KeyError:
        raise SystemExit(
            f"UID {os.getuid()} has no account in this image (e.g. compose's "
            "`user:`); build the image with --build-arg TFNORM_UID/TFNORM_GID "
            "instead"
        ) from None


def account_environment(environ):
    """The environment with HOME/USER/SHELL of the user this process runs as."""
    account = current_account()
    env = dict(environ)
    env.update(
        HOME=account.pw_dir,
        USER=account.pw_name,
        LOGNAME=account.pw_name,
        SHELL=account.pw_shell or "/bin/sh",
    )
    return env


def child_environment(environ):
    return {k: v for k, v in environ.items() if k not in ENTRYPOINT_ONLY}


# --- SSH ------------------------------------------------------------------


def session_environment(environ, extra_names=()):
    """The variables SSH sessions should see: TF/CUDA settings, no secrets."""
    patterns = tuple(SESSION_ENV_NAMES) + tuple(extra_names)
    selected = {}
    for name, value in sorted(environ.items()):
        if SECRET_NAME.search(name) or name in ENTRYPOINT_ONLY:
            continue
        for pattern in patterns:
            if pattern.endswith("*"):
                matched = name.startswith(pattern[:-1])
            else:
                matched = name == pattern
            if matched:
                if '"' in value or "\n" in value:
                    log(f"not passing {name} to SSH sessions: its value has quotes")
                else:
                    selected[name] = value
                break
    return selected


def read_authorized_keys(settings):
    """Public keys from the mounted file and `SSH_AUTHORIZED_KEYS`, de-duplicated."""
    texts = []
    path = settings.authorized_keys_file
    if os.path.isdir(path):
        # What Docker creates when the host file of a bind mount is missing.
        log(f"{path} is a directory (its host file does not exist?); ignoring it")
    elif os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as handle:
                texts.append(handle.read())
        except PermissionError:
            log(
                f"cannot read {path} as {current_account().pw_name}: make the "
                "host file readable (chmod 644; it holds public keys only)"
            )
    texts.append(settings.authorized_keys_env.replace("\\n", "\n"))
    keys = []
    for text in texts:
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if "PRIVATE KEY" in line:
                raise SystemExit(
                    "a private key was given as an authorized key; give the "
                    "public key (the .pub file) instead"
                )
            if line not in keys:
                keys.append(line)
    return keys


def install_authorized_keys(keys, home):
    ssh_dir = os.path.join(home, ".ssh")
    os.makedirs(ssh_dir, mode=0o700, exist_ok=True)
    os.chmod(ssh_dir, 0o700)
    target = os.path.join(ssh_dir, "authorized_keys")
    _write_private(target, "".join(key + "\n" for key in keys))
    return target


def ensure_host_keys(settings):
    """Host keys, generated on first start only, so fingerprints stay stable."""
    os.makedirs(settings.host_key_dir, mode=0o700, exist_ok=True)
    paths = []
    for key_type in HOST_KEY_TYPES:
        path = os.path.join(settings.host_key_dir, f"ssh_host_{key_type}_key")
        if not os.path.exists(path):
            log(f"generating SSH host key {path}")
            subprocess.run(
                [settings.ssh_keygen, "-q", "-t", key_type, "-N", "", "-C", ""]
                + ["-f", path],
                check=True,
            )
        os.chmod(path, 0o600)
        fingerprint = subprocess.run(
            [settings.ssh_keygen, "-l", "-f", path + ".pub"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        log(f"SSH host key: {fingerprint}")
        paths.append(path)
    return paths


def render_sshd_config(settings, host_keys, session_env):
    with open(settings.sshd_template, encoding="utf-8") as handle:
        template = string.Template(handle.read())
    if session_env:
        setenv_line = "SetEnv " + " ".join(
            f'"{name}={value}"' for name, value in session_env.items()
        )
    else:
        setenv_line = ""
    return template.substitute(
        port=settings.ssh_port,
        listen_address=settings.ssh_listen_address,
        host_key_lines="\n".join(f"HostKey {path}" for path in host_keys),
        pid_file=settings.sshd_pid_file,
        user=current_account().pw_name,
        setenv_line=setenv_line,
    )


def write_session_env_script(path, session_env):
    """The same variables for login shells (sourced by /etc/profile.d)."""
    lines = ["# Written by the tfnorm entrypoint: the container's TF/CUDA env.\n"]
    lines += [
        f"export {name}={shlex.quote(value)}\n" for name, value in session_env.items()
    ]
    _write_private(path, "".join(lines), mode=0o644)


def start_sshd(settings, env):
    """Prepares and starts sshd; returns the process, or None without keys."""
    keys = read_authorized_keys(settings)
    if not keys:
        log(
            "SSH is disabled: no public key was given. To enable it, put your "
            "public key in the file mounted at "
            f"{settings.authorized_keys_file} (compose: SSH_AUTHORIZED_KEYS_FILE) "
            "or set SSH_AUTHORIZED_KEYS, then restart the container."
        )
        return None
    installed = install_authorized_keys(keys, env["HOME"])
    log(f"installed {len(keys)} authorized key(s) into {installed}")
    host_keys = ensure_host_keys(settings)
    session_env = session_environment(env, settings.extra_session_env)
    write_session_env_script(settings.session_env_file, session_env)
    _write_private(
        settings.sshd_config, render_sshd_config(settings, host_keys, session_env)
    )
    check = subprocess.run(
        [settings.sshd, "-t", "-f", settings.sshd_config],
        capture_output=True,
        text=True,
    )
    if check.returncode != 0:
        raise SystemExit(f"sshd rejected its configuration: {check.stderr.strip()}")
    log(
        f"starting sshd on port {settings.ssh_port} (key-only) for "
        f"{current_account().pw_name}"
    )
    return subprocess.Popen(
        [settings.sshd, "-D", "-e", "-f", settings.sshd_config],
        env=env,
        start_new_session=True,
    )


# --- JupyterLab -----------------------------------------------------------


def resolve_token(settings):
    """Returns (token, generated): JupyterLab never starts without a token."""
    token = settings.jupyter_token.strip()
    if token:
        return token, False
    return secrets.token_hex(24), True


def write_default_lab_settings(env):
    """JupyterLab never fetches news nor asks to: the container calls no one.

    Written only when the user has no such settings yet, so a choice made in
    Settings > Notifications survives.
    """
    settings_dir = env.get("JUPYTERLAB_SETTINGS_DIR") or os.path.join(
        env["HOME"], ".jupyter", "lab", "user-settings"
    )
    path = os.path.join(
        settings_dir,
        "@jupyterlab",
        "apputils-extension",
        "notification.jupyterlab-settings",
    )
    if os.path.exists(path):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    _write_private(
        path, json.dumps({"fetchNews": "false", "checkForUpdates": False}, indent=2)
    )


def start_jupyter(settings, env):
    write_default_lab_settings(env)
    token, generated = resolve_token(settings)
    # The token goes in a private config file, not the command line (visible
    # in `ps`) nor the environment (inherited by every kernel).
    config = {
        "IdentityProvider": {"token": token},
        # No calls home from the container (and no news prompt in the UI).
        "LabApp": {
            "news_url": None,
            "check_for_updates_class": "jupyterlab.NeverCheckForUpdate",
        },
    }
    _write_private(settings.jupyter_config, json.dumps(config))
    command = [
        settings.jupyter,
        "lab",
        "--no-browser",
        f"--config={settings.jupyter_config}",
        f"--ServerApp.ip={settings.jupyter_ip}",
        f"--ServerApp.port={settings.jupyter_port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={settings.workspace}",
    ]
    log(
        f"starting JupyterLab on port {settings.jupyter_port}, "
        f"root {settings.workspace}"
    )
    process = subprocess.Popen(
        command, env=env, cwd=settings.workspace, start_new_session=True
    )
    if generated:
        log(
            "JupyterLab token (generated; set JUPYTER_TOKEN to choose one): "
            f"{token}\n    open {settings.public_url}/lab?token={token}"
        )
    else:
        log(f"JupyterLab uses JUPYTER_TOKEN: open {settings.public_url}/lab?token=...")
    return process


# --- supervision ----------------------------------------------------------


def _write_private(path, text, mode=0o600):
    temporary = f"{path}.tmp{os.getpid()}"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(temporary, mode)
    os.replace(temporary, path)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def workload_processes():
    """PIDs of this user's processes, except this one and its ancestors.

    In the container these are JupyterLab, kernels, sshd, SSH sessions and
    runs started with nohup: `docker stop` must reach all of them.
    """
    uid = os.getuid()
    excluded = {1}
    pid = os.getpid()
    while pid > 1:
        excluded.add(pid)
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
                pid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in excluded:
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid == uid and _alive(entry):
                found.append(int(entry))
        except OSError:
            continue
    return found


def stop_everything(children, timeout):
    """SIGTERM to every workload process; SIGKILL what outlives `timeout`."""
    targets = set(workload_processes()) | {c.pid for c in children if c.poll() is None}
    log(f"stopping {len(targets)} process(es) (up to {timeout:g}s)")
    for pid in targets:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in children:
            child.poll()  # reaps our own children so they stop counting as alive
        if not any(_alive(pid) for pid in targets):
            return True
        time.sleep(0.2)
    left = [pid for pid in targets if _alive(pid)]
    log(f"killing {len(left)} process(es) still alive after {timeout:g}s: {left}")
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for child in children:
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    return False


def run_services(settings, env):
    stop_requested = []

    def request_stop(signum, _frame):
        stop_requested.append(signum)

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    os.makedirs(settings.runtime_dir, mode=0o700, exist_ok=True)
    for stale in (settings.sshd_pid_file, settings.session_env_file):
        if os.path.exists(stale):
            os.remove(stale)
    services = {}
    try:
        sshd = start_sshd(settings, env)
        if sshd is not None:
            services["sshd"] = sshd
        services["JupyterLab"] = start_jupyter(settings, env)
        while not stop_requested:
            for name, process in services.items():
                if process.poll() is not None:
                    log(
                        f"{name} exited with code {process.returncode}; "
                        "stopping the container"
                    )
                    stop_everything(list(services.values()), settings.stop_timeout)
                    return process.returncode or 1
            time.sleep(0.2)
    except BaseException:
        # A failed start must not leave sshd or JupyterLab running unsupervised.
        stop_everything(list(services.values()), settings.stop_timeout)
        raise
    log(f"received signal {stop_requested[0]}; stopping")
    clean = stop_everything(list(services.values()), settings.stop_timeout)
    return 0 if clean else 1


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    settings = Settings(os.environ)
    if os.geteuid() == 0:
        drop_privileges(settings)
    elif current_account().pw_name != settings.user:
        log(
            f"running as {current_account().pw_name}, not TFNORM_USER="
            f"{settings.user}; continuing as the current user"
        )
    warn_unwritable_mounts(settings)
    env = child_environment(account_environment(os.environ))
    if argv and argv[0] != "lab":
        # tensorboard, a worker, a shell: the command replaces this process so
        # tini's signals reach it directly.
        try:
            os.execvpe(argv[0], argv, env)
        except OSError as error:
            raise SystemExit(f"cannot run {argv[0]!r}: {error}") from None
    return run_services(settings, env)


if __name__ == "__main__":
    sys.exit(main())

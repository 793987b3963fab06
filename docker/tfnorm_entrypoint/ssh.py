"""Key-only SSH for the workload user: authorized keys, host keys, sshd_config, sshd.

sshd runs as the workload user (so only that user can log in) when at least
one valid public key is given, through the mounted `TFNORM_AUTHORIZED_KEYS_FILE`
or `SSH_AUTHORIZED_KEYS`. Host keys are generated once into
`TFNORM_SSH_HOST_KEY_DIR` (a volume, so fingerprints survive restarts).
Sessions get the container's TensorFlow/CUDA environment through `SetEnv`
and a script for login shells, never the entrypoint-only variables.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess

from tfnorm_entrypoint.accounts import current_account
from tfnorm_entrypoint.files import prepare_directory, set_file_mode, write_private
from tfnorm_entrypoint.log import log
from tfnorm_entrypoint.preflight import executable
from tfnorm_entrypoint.settings import ENTRYPOINT_ONLY, is_utf8
from tfnorm_entrypoint.sshd_config import read_sshd_template, render_sshd_config

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
VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A value SetEnv can carry inside double quotes: no quote, backslash or
# control character (a new line would end the directive).
SETENV_VALUE = re.compile(r"[^\x00-\x1f\x7f\"\\]*")
HOST_KEY_TYPES = ("ed25519", "ecdsa")


def start_sshd(settings, env):
    """Prepares and starts sshd; returns the process, or None without a valid key."""
    for stale in (settings.sshd_pid_file, settings.session_env_file):
        if os.path.lexists(stale):
            os.remove(stale)
    keys, rejected = read_authorized_keys(settings)
    if not keys:
        log(_ssh_disabled_message(settings, rejected))
        return None
    # What sshd needs is checked before anything is written for it.
    sshd = executable(settings.sshd, "TFNORM_SSHD")
    read_sshd_template(settings.sshd_template)
    installed = install_authorized_keys(keys, env["HOME"])
    log(f"installed {len(keys)} authorized key(s) into {installed}")
    host_keys = ensure_host_keys(settings)
    session_env = session_environment(env, settings.extra_session_env)
    write_session_env_script(settings.session_env_file, session_env)
    write_private(
        settings.sshd_config, render_sshd_config(settings, host_keys, session_env)
    )
    check = subprocess.run(
        [sshd, "-t", "-f", settings.sshd_config],
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
        [sshd, "-D", "-e", "-f", settings.sshd_config],
        env=env,
        start_new_session=True,
    )


def _ssh_disabled_message(settings, rejected):
    if rejected:
        reason = (
            f"none of the {rejected} key line(s) given is a valid public key "
            "(see the lines above)"
        )
    else:
        reason = "no public key was given"
    return (
        f"SSH is disabled: {reason}. To enable it, put your public key in the "
        f"file mounted at {settings.authorized_keys_file} (compose: "
        "SSH_AUTHORIZED_KEYS_FILE) or set SSH_AUTHORIZED_KEYS, then restart the "
        "container."
    )


# --- authorized keys ---------------------------------------------------------


def read_authorized_keys(settings):
    """Valid public keys from the mounted file and `SSH_AUTHORIZED_KEYS`.

    Returns (keys, rejected): the keys de-duplicated in the order given, and
    how many lines were skipped because `ssh-keygen -l` (which reads options,
    key type and base64 key as sshd does) rejects them. A skipped line is
    named by its source and line number, never printed.
    """
    keys = []
    rejected = 0
    lines = list(_key_lines(settings))
    ssh_keygen = executable(settings.ssh_keygen, "TFNORM_SSH_KEYGEN") if lines else ""
    for source, number, line in lines:
        if line in keys:
            continue
        if not is_utf8(line):
            rejected += 1
            log(f"{source} line {number} is not UTF-8 text; skipped")
        elif _is_public_key(ssh_keygen, line):
            keys.append(line)
        else:
            rejected += 1
            log(
                f"{source} line {number} is not a valid public key (expected: "
                "[options] key-type base64-key [comment]); skipped"
            )
    return keys, rejected


def _key_lines(settings):
    """(source, line number, line) of each non-comment line given."""
    sources = []
    path = settings.authorized_keys_file
    if os.path.isdir(path):
        # What Docker creates when the host file of a bind mount is missing.
        log(f"{path} is a directory (its host file does not exist?); ignoring it")
    elif os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as handle:
                sources.append((path, handle.read()))
        except PermissionError:
            log(
                f"cannot read {path} as {current_account().pw_name}: make the "
                "host file readable (chmod 644; it holds public keys only)"
            )
        except UnicodeDecodeError:
            log(f"{path} is not a text file of public keys; ignoring it")
    sources.append(
        ("SSH_AUTHORIZED_KEYS", settings.authorized_keys_env.replace("\\n", "\n"))
    )
    for source, text in sources:
        for number, line in enumerate(text.splitlines(), start=1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if "PRIVATE KEY" in line:
                raise SystemExit(
                    "a private key was given as an authorized key; give the "
                    "public key (the .pub file) instead"
                )
            yield source, number, line


def _is_public_key(ssh_keygen, line):
    checked = subprocess.run(
        [ssh_keygen, "-l", "-f", "-"],
        input=line + "\n",
        capture_output=True,
        text=True,
    )
    return checked.returncode == 0


def install_authorized_keys(keys, home):
    ssh_dir = os.path.join(home, ".ssh")
    prepare_directory(ssh_dir, 0o700)
    target = os.path.join(ssh_dir, "authorized_keys")
    write_private(target, "".join(key + "\n" for key in keys))
    return target


# --- host keys ---------------------------------------------------------------


def ensure_host_keys(settings):
    """Host keys, generated on first start only, so fingerprints stay stable.

    A missing or stale `.pub` is written again from its private key; a
    private key ssh-keygen cannot read is replaced by a new one, with a
    WARNING naming it (clients then see a new fingerprint).
    """
    os.makedirs(settings.host_key_dir, mode=0o700, exist_ok=True)
    paths = []
    for key_type in HOST_KEY_TYPES:
        path = os.path.join(settings.host_key_dir, f"ssh_host_{key_type}_key")
        _ensure_host_key(settings.ssh_keygen, key_type, path)
        fingerprint = subprocess.run(
            [settings.ssh_keygen, "-l", "-f", path + ".pub"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        log(f"SSH host key: {fingerprint}")
        paths.append(path)
    return paths


def _ensure_host_key(ssh_keygen, key_type, path):
    if not os.path.lexists(path):
        log(f"generating SSH host key {path}")
        _generate_host_key(ssh_keygen, key_type, path)
        return
    set_file_mode(path, 0o600)
    public_key = _public_key_of(ssh_keygen, path)
    if public_key is None:
        log(
            f"WARNING: SSH host key {path} cannot be read (damaged?); replacing "
            "it with a new one: clients will see a new host key fingerprint"
        )
        os.remove(path)
        _generate_host_key(ssh_keygen, key_type, path)
    elif _read_public_key(path + ".pub") != public_key.split()[:2]:
        log(f"{path}.pub is missing or stale; writing it from the private key")
        write_private(path + ".pub", public_key + "\n", mode=0o644)


def _generate_host_key(ssh_keygen, key_type, path):
    if os.path.lexists(path + ".pub"):
        os.remove(path + ".pub")
    subprocess.run(
        [ssh_keygen, "-q", "-t", key_type, "-N", "", "-C", "", "-f", path],
        check=True,
    )
    set_file_mode(path, 0o600)


def _public_key_of(ssh_keygen, path):
    """The public key line of the private key at `path`, or None if unreadable."""
    derived = subprocess.run(
        [ssh_keygen, "-y", "-P", "", "-f", path],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    public_key = derived.stdout.strip()
    return public_key if derived.returncode == 0 and public_key else None


def _read_public_key(path):
    """Key type and base64 key of a `.pub` file, or None if there is none."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().split()[:2]
    except (OSError, UnicodeDecodeError):
        return None


# --- sshd_config and the session environment ---------------------------------


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
                if not VARIABLE_NAME.fullmatch(name):
                    log(f"not passing {name!r} to SSH sessions: not a variable name")
                elif not is_utf8(value):
                    log(
                        f"not passing {name} to SSH sessions: its value is not "
                        "UTF-8 text"
                    )
                elif not SETENV_VALUE.fullmatch(value):
                    log(
                        f"not passing {name} to SSH sessions: its value has quotes, "
                        "backslashes or control characters"
                    )
                else:
                    selected[name] = value
                break
    return selected


def write_session_env_script(path, session_env):
    """The same variables for login shells (sourced by /etc/profile.d)."""
    lines = ["# Written by the tfnorm entrypoint: the container's TF/CUDA env.\n"]
    lines += [
        f"export {name}={shlex.quote(value)}\n" for name, value in session_env.items()
    ]
    write_private(path, "".join(lines), mode=0o644)

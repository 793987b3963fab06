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
import string
import subprocess

from tfnorm_entrypoint.accounts import current_account
from tfnorm_entrypoint.files import prepare_directory, set_file_mode, write_private
from tfnorm_entrypoint.log import log
from tfnorm_entrypoint.settings import ENTRYPOINT_ONLY, config_word

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
    installed = install_authorized_keys(keys, env["HOME"])
    log(f"installed {len(keys)} authorized key(s) into {installed}")
    host_keys = ensure_host_keys(settings)
    session_env = session_environment(env, settings.extra_session_env)
    write_session_env_script(settings.session_env_file, session_env)
    write_private(
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
    for source, number, line in _key_lines(settings):
        if line in keys:
            continue
        if _is_public_key(settings.ssh_keygen, line):
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
                elif not SETENV_VALUE.fullmatch(value):
                    log(
                        f"not passing {name} to SSH sessions: its value has quotes, "
                        "backslashes or control characters"
                    )
                else:
                    selected[name] = value
                break
    return selected


# Lines the rendered sshd_config must hold exactly once, whatever the template:
# key-only login for the one user.
REQUIRED_SSHD_LINES = (
    "PubkeyAuthentication yes",
    "PasswordAuthentication no",
    "PermitEmptyPasswords no",
    "KbdInteractiveAuthentication no",
    "ChallengeResponseAuthentication no",
    "PermitRootLogin no",
    "PermitUserEnvironment no",
)
# Placeholders that fill a whole line of the template (or several, or none).
_LINE_PLACEHOLDERS = ("${host_key_lines}", "${setenv_line}")


def render_sshd_config(settings, host_keys, session_env):
    """The sshd_config text, checked line by line (see `check_sshd_config`)."""
    with open(settings.sshd_template, encoding="utf-8") as handle:
        template_text = handle.read()
    setenv_line = (
        "SetEnv " + " ".join(f'"{name}={value}"' for name, value in session_env.items())
        if session_env
        else ""
    )
    rendered = string.Template(template_text).substitute(
        port=settings.ssh_port,
        listen_address=settings.ssh_listen_address,
        host_key_lines="\n".join(f"HostKey {path}" for path in host_keys),
        pid_file=settings.sshd_pid_file,
        user=config_word(current_account().pw_name, "the user's name"),
        setenv_line=setenv_line,
    )
    check_sshd_config(rendered, template_text, settings, host_keys, setenv_line)
    return rendered


def check_sshd_config(rendered, template_text, settings, host_keys, setenv_line):
    """Stops the entrypoint unless `rendered` has exactly the expected lines.

    The settings are checked when read; this is the second line of defence
    against a value (or a template) that adds a line: the line count is the
    template's (its host-key line counted once per key), each line keeps the
    template line's keyword, there is one `ListenAddress` (the setting's) and
    every `REQUIRED_SSHD_LINES` line is there exactly once.
    """
    problem = _sshd_config_problem(
        rendered, template_text, settings, host_keys, setenv_line
    )
    if problem:
        raise SystemExit(
            f"refusing to start sshd: the rendered sshd_config {problem} (a "
            "setting or TFNORM_SSHD_TEMPLATE adds or changes a line)"
        )


def _sshd_config_problem(rendered, template_text, settings, host_keys, setenv_line):
    if re.search(r"[\x00-\x08\x0b-\x1f\x7f]", rendered):
        return "holds a control character"
    lines = rendered.split("\n")
    expected = []  # the keyword each line must start with ("" for any comment)
    for line in template_text.split("\n"):
        if line.strip() == "${host_key_lines}":
            expected += ["HostKey"] * len(host_keys)
        elif line.strip() == "${setenv_line}":
            expected.append("SetEnv" if setenv_line else "")
        else:
            expected.append(_keyword(line))
    if len(lines) != len(expected):
        return f"has {len(lines)} lines where the template gives {len(expected)}"
    for number, (line, keyword) in enumerate(zip(lines, expected), start=1):
        if _keyword(line) != keyword:
            return f"line {number} starts with {_keyword(line)!r}, not {keyword!r}"
    listen = [line for line in lines if _keyword(line).lower() == "listenaddress"]
    if listen != [f"ListenAddress {settings.ssh_listen_address}"]:
        return f"has {len(listen)} ListenAddress line(s) other than the setting's"
    for required in REQUIRED_SSHD_LINES:
        word = required.split()[0].lower()
        same_keyword = [line for line in lines if _keyword(line).lower() == word]
        if same_keyword != [required]:
            return f"does not have exactly one {required!r} line"
    return None


def _keyword(line):
    """The directive a sshd_config line sets ("" for blank and comment lines)."""
    words = line.replace("=", " ").split()
    return "" if not words or words[0].startswith("#") else words[0]


def write_session_env_script(path, session_env):
    """The same variables for login shells (sourced by /etc/profile.d)."""
    lines = ["# Written by the tfnorm entrypoint: the container's TF/CUDA env.\n"]
    lines += [
        f"export {name}={shlex.quote(value)}\n" for name, value in session_env.items()
    ]
    write_private(path, "".join(lines), mode=0o644)

"""Every environment setting of the entrypoint, read and checked in one place.

`Settings(os.environ)` runs before anything is created or started: a bad value
stops the entrypoint with one line naming the setting and the value. Values
written into sshd_config (and the addresses JupyterLab listens on) are
checked against the exact grammar of what they may be (an IP address, with
an IPv6 scope id of `[A-Za-z0-9_.-]` only, or an RFC 1123 host name; a port
number; a path that is one word), so no value can add a line to a
configuration file (`SSH_LISTEN_ADDRESS=$'fe80::1%lo\\nPasswordAuthentication
yes'` is refused). `sshd_config.render_sshd_config` checks the rendered file too.

Every value must be UTF-8 text: the environment is bytes, and a byte that is
not UTF-8 (a path typed in a Latin-1 terminal) would otherwise pass these
checks and fail later, when a file is written, as a traceback in a restart
loop. `SSH_AUTHORIZED_KEYS` is read line by line instead (`ssh.py` skips a
line that is not text, naming it), and the token is never shown.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import unicodedata

DOCKER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKSPACE_FOLDERS = ("notebooks", "data", "runs")
# Variables only the entrypoint may read: children (JupyterLab, its kernels,
# commands, SSH sessions) never see them.
ENTRYPOINT_ONLY = ("JUPYTER_TOKEN", "SSH_AUTHORIZED_KEYS")

# RFC 1123 host names: dot-separated labels of letters, digits and inner
# hyphens (ASCII only: `re`'s character classes are explicit ranges here).
HOST_NAME = re.compile(
    r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*"
)
# The characters an IP address is written with, and an IPv6 zone (scope id):
# an interface name or index. Python >= 3.9's `ipaddress` accepts any text
# after "%", a new line included, so the zone is checked here, not there.
ADDRESS_CHARACTERS = re.compile(r"[0-9A-Fa-f:.]+")
SCOPE_ID = re.compile(r"[A-Za-z0-9_.-]+")
# What sshd_config reads as one argument: no whitespace or control character
# (a new line or word), no quote or backslash (quoting), no "=" (sshd's other
# separator), no "#" (a comment).
CONFIG_WORD = re.compile(r"[^\x00-\x20\x7f\"'\\=#]+")
# Entries of TFNORM_SSH_ENV: a variable name, or a prefix ending in "*".
VARIABLE_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\*?")
# A character that starts a new line or rewrites one on a terminal: C0 and C1
# controls, DEL, and Unicode's line and paragraph separators. The public URL
# is printed on the line that carries the token, so none may be in it.
CONTROL_CHARACTER = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Settings whose value is shown in no message.
SECRET_SETTINGS = ("JUPYTER_TOKEN",)


class Settings:
    """Where things live and how services listen, read from the environment."""

    def __init__(self, environ):
        def get(name, default):
            return utf8_text(environ.get(name, default), name)

        self.user = get("TFNORM_USER", "tfnorm")
        self.workspace = get("TFNORM_WORKSPACE", "/workspace")
        # Bind mounts of the host's folders (docker-compose.yml).
        self.workspace_mounts = [
            os.path.join(self.workspace, name) for name in WORKSPACE_FOLDERS
        ]
        self.runtime_dir = config_word(
            get("TFNORM_RUNTIME_DIR", "/run/tfnorm"), "TFNORM_RUNTIME_DIR"
        )
        self.host_key_dir = config_word(
            get("TFNORM_SSH_HOST_KEY_DIR", "/var/lib/tfnorm/ssh"),
            "TFNORM_SSH_HOST_KEY_DIR",
        )
        self.authorized_keys_file = get(
            "TFNORM_AUTHORIZED_KEYS_FILE", "/etc/tfnorm/authorized_keys"
        )
        self.authorized_keys_env = environ.get("SSH_AUTHORIZED_KEYS", "")
        self.sshd = get("TFNORM_SSHD", "/usr/sbin/sshd")
        self.ssh_keygen = get("TFNORM_SSH_KEYGEN", "ssh-keygen")
        self.sshd_template = get(
            "TFNORM_SSHD_TEMPLATE", os.path.join(DOCKER_DIR, "sshd_config.template")
        )
        self.ssh_port = _port(get("SSH_PORT", "22"), "SSH_PORT")
        self.ssh_listen_address = _address(
            get("SSH_LISTEN_ADDRESS", "0.0.0.0"), "SSH_LISTEN_ADDRESS"
        )
        self.extra_session_env = _variable_patterns(
            get("TFNORM_SSH_ENV", ""), "TFNORM_SSH_ENV"
        )
        self.jupyter = get("TFNORM_JUPYTER", "jupyter")
        self.jupyter_ip = _address(get("JUPYTER_IP", "0.0.0.0"), "JUPYTER_IP")
        self.jupyter_port = _port(get("JUPYTER_PORT", "8888"), "JUPYTER_PORT")
        self.jupyter_token = get("JUPYTER_TOKEN", "")
        self.public_url = _url(
            get("TFNORM_PUBLIC_URL", f"http://127.0.0.1:{self.jupyter_port}"),
            "TFNORM_PUBLIC_URL",
        ).rstrip("/")
        self.stop_timeout = _positive_seconds(
            get("TFNORM_STOP_TIMEOUT", "60"), "TFNORM_STOP_TIMEOUT"
        )

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


def utf8_text(value, name):
    """`value` if it is UTF-8 text (what the environment's bytes decode to)."""
    if is_utf8(value):
        return value
    shown = (
        "(not shown: it is a secret)"
        if name in SECRET_SETTINGS
        else f"Received: {os.fsencode(value)!r}"
    )
    raise SystemExit(f"{name} must be UTF-8 text; it has other bytes. {shown}")


def is_utf8(value):
    """Whether `value` came from UTF-8 bytes: Python decodes the environment
    with surrogate escapes, which strict UTF-8 encoding refuses."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _printable(value, name):
    if CONTROL_CHARACTER.search(value):
        raise SystemExit(
            f"{name} must have no new line or other control character (it is "
            f"printed in the log, on the line with the token). Received: {value!r}"
        )
    return value


def _url(value, name):
    """`value` if it is one http(s) URL: printed on the line with the token,
    a space would let free text follow it, and a format character (a
    right-to-left override) would show the reader another address."""
    _printable(value, name)
    hidden = [c for c in value if unicodedata.category(c)[0] in "CZ"]
    if hidden or not re.match(r"https?://[^/?#]", value):
        raise SystemExit(
            f"{name} must be one http:// or https:// URL, without spaces or "
            "invisible (format) characters such as a right-to-left override "
            f"(it is printed in the log, on the line with the token). Received: {value!r}"
        )
    return value


def config_word(value, name):
    """`value` if sshd_config reads it as exactly one argument."""
    if not CONFIG_WORD.fullmatch(value):
        raise SystemExit(
            f"{name} must be one word without spaces, quotes, backslashes, '=', "
            "'#' or control characters (it is written into sshd_config). "
            f"Received: {value!r}"
        )
    return value


def _port(value, name):
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 < port < 65536:
        raise SystemExit(f"{name} must be a port number 1-65535. Received: {value!r}")
    return port


def _positive_seconds(value, name):
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    # float() also reads "nan" and "inf": neither is a deadline.
    if not (math.isfinite(seconds) and seconds > 0):
        raise SystemExit(
            f"{name} must be a finite number of seconds > 0. Received: {value!r}"
        )
    return seconds


def _address(value, name):
    """`value` if it is an IP address or a host name, exactly.

    An IPv6 address may carry a scope id of `[A-Za-z0-9_.-]` (`fe80::1%eth0`);
    nothing else is let through, whatever `ipaddress` would accept.
    """
    if _is_ip_address(value):
        return value
    labels = value.split(".")
    # A last label of digits only is no host name: `1.2.3` is read as an
    # IPv4 address (1.2.0.3) by the resolver.
    if len(value) <= 253 and HOST_NAME.fullmatch(value) and not labels[-1].isdigit():
        return value
    raise SystemExit(
        f"{name} must be an IP address (an IPv6 one may end in %<interface> of "
        "letters, digits, '_', '.' or '-') or a host name. "
        f"Received: {value!r}"
    )


def _is_ip_address(value):
    address, percent, scope = value.partition("%")
    if not ADDRESS_CHARACTERS.fullmatch(address):
        return False
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False
    if not percent:
        return True
    return parsed.version == 6 and bool(SCOPE_ID.fullmatch(scope))


def _variable_patterns(value, name):
    patterns = value.split()
    for pattern in patterns:
        if not VARIABLE_PATTERN.fullmatch(pattern):
            raise SystemExit(
                f"{name} must list variable names (or prefixes ending in '*') "
                f"separated by spaces. Received: {value!r}"
            )
    return patterns

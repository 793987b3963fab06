"""docker/tfnorm_entrypoint/settings.py: every setting checked before anything starts."""

from __future__ import annotations

import os

import pytest
from tfnorm_entrypoint.settings import Settings

from tests.docker.harness import failed_start

# Values that would add a line to sshd_config, or are no deadline or port.
BAD_SETTINGS = [
    ("SSH_LISTEN_ADDRESS", "0.0.0.0\nPasswordAuthentication yes"),
    ("SSH_LISTEN_ADDRESS", "127.0.0.1 ::1"),
    ("SSH_LISTEN_ADDRESS", ""),
    # Python >= 3.9's ipaddress accepts any text after "%" as a scope id.
    (
        "SSH_LISTEN_ADDRESS",
        "fe80::1%lo\nListenAddress 0.0.0.0\nPasswordAuthentication yes",
    ),
    ("SSH_LISTEN_ADDRESS", "fe80::1%lo PasswordAuthentication"),
    ("JUPYTER_IP", "fe80::1%lo\n--ServerApp.token="),
    ("JUPYTER_IP", "127.0.0.1\n--ServerApp.token="),
    ("SSH_PORT", "22\nPasswordAuthentication yes"),
    ("JUPYTER_PORT", "http"),
    ("TFNORM_STOP_TIMEOUT", "nan"),
    ("TFNORM_STOP_TIMEOUT", "inf"),
    ("TFNORM_STOP_TIMEOUT", "-1"),
    ("TFNORM_STOP_TIMEOUT", "abc"),
    ("TFNORM_STOP_TIMEOUT", "0"),
    ("TFNORM_RUNTIME_DIR", "/run/x\nPasswordAuthentication yes"),
    ("TFNORM_SSH_HOST_KEY_DIR", "/var/lib/host keys"),
    ("TFNORM_SSH_HOST_KEY_DIR", '/keys"'),
    ("TFNORM_SSH_ENV", "MY_VAR BAD-NAME"),
    # Bytes that are not UTF-8 (here 0xff and a Latin-1 "é", 0xe9), which
    # Python reads as surrogate escapes: refused, never a traceback later.
    ("TFNORM_RUNTIME_DIR", "/run/tfnorm\udcff"),
    ("TFNORM_SSH_HOST_KEY_DIR", "/var/lib/caf\udce9"),
    ("TFNORM_WORKSPACE", "/workspace/caf\udce9"),
    ("TFNORM_JUPYTER", "jupyter\udcff"),
    ("JUPYTER_TOKEN", "a-secret-token-\udcff"),
    # Printed on the line with the token: a new line would forge another
    # token line in the log, which `grep token=` would then show.
    ("TFNORM_PUBLIC_URL", "http://lab\n[tfnorm-entrypoint] open http://x/lab?token=1"),
    ("TFNORM_PUBLIC_URL", "http://lab\r    open http://x/lab?token=1"),
    ("TFNORM_PUBLIC_URL", "http://lab\x1b[2K"),
    ("TFNORM_PUBLIC_URL", "http://lab\u2028open http://x/lab?token=1"),
    ("TFNORM_PUBLIC_URL", "http://lab\x85x"),
    # A right-to-left override shows the reader another address; free text
    # after a space reads as the log's own words.
    ("TFNORM_PUBLIC_URL", "http://lab.example/\u202egro.live"),
    ("TFNORM_PUBLIC_URL", "http://lab:8888 then paste your token at http://x"),
    ("TFNORM_PUBLIC_URL", "lab.example:8888"),
]


def test_invalid_settings_name_the_variable_and_the_value():
    with pytest.raises(SystemExit, match=r"JUPYTER_PORT.*Received: 'http'"):
        Settings({"JUPYTER_PORT": "http"})
    with pytest.raises(SystemExit, match=r"TFNORM_STOP_TIMEOUT.*Received: '-1'"):
        Settings({"TFNORM_STOP_TIMEOUT": "-1"})


@pytest.mark.parametrize("name, value", BAD_SETTINGS)
def test_a_bad_setting_is_one_line_naming_it_and_nothing_starts(name, value, tmp_path):
    """The real entrypoint: exit non-zero, one stderr line with the setting and
    the value, and no directory made, no service started."""
    started = tmp_path / "started"
    service = tmp_path / "service.sh"
    service.write_text(f"#!/bin/sh\ntouch {started}\n")
    service.chmod(0o755)
    env = {
        "PATH": "/usr/bin:/bin",
        "TFNORM_USER": "nobody",
        "TFNORM_WORKSPACE": str(tmp_path),
        "TFNORM_RUNTIME_DIR": str(tmp_path / "run"),
        "TFNORM_SSH_HOST_KEY_DIR": str(tmp_path / "keys"),
        "TFNORM_SSHD": str(service),
        "TFNORM_JUPYTER": str(service),
        "SSH_AUTHORIZED_KEYS": "ssh-ed25519 AAAA",
        name: value,
    }
    result = failed_start(env, timeout=60)
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert name in result.stderr and shown(name, value) in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["service.sh"]


def shown(name, value):
    """How the one line shows `value`: as the bytes given when they are not
    UTF-8 text, and not at all for the token."""
    if name == "JUPYTER_TOKEN":
        return "(not shown: it is a secret)"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return f"Received: {os.fsencode(value)!r}"
    return f"Received: {value!r}"


def test_addresses_and_timeouts_users_give_are_accepted():
    for address in ("0.0.0.0", "::", "::1", "localhost", "lab-1.example.org"):
        settings = Settings({"SSH_LISTEN_ADDRESS": address, "JUPYTER_IP": address})
        assert (settings.ssh_listen_address, settings.jupyter_ip) == (address,) * 2
    for text, seconds in (("0.5", 0.5), ("100", 100.0), (" 60 ", 60.0)):
        assert Settings({"TFNORM_STOP_TIMEOUT": text}).stop_timeout == seconds
    settings = Settings({"TFNORM_SSH_ENV": "MY_VAR  HF_*"})
    assert settings.extra_session_env == ["MY_VAR", "HF_*"]


# Each an address or host name sshd or JupyterLab would misread (or a line
# added to a config file); tried against `_address` directly.
ADDRESS_ATTACKS = [
    "fe80::1%lo\nListenAddress 0.0.0.0\nPasswordAuthentication yes",
    "fe80::1%lo\rPasswordAuthentication yes",
    "fe80::1%lo\tyes",
    "fe80::1%lo#comment",
    "fe80::1%lo=1",
    'fe80::1%"lo"',
    "fe80::1%lo\\n",
    "fe80::1%",
    "fe80::1%%lo",
    "fe80::1%lo%eth0",
    "fe80::1%l\u00f6",  # not ASCII
    "fe80::1%lo\x00",
    "127.0.0.1%lo",  # IPv4 has no scope id
    "::ffff:127.0.0.1%lo\n",
    "0.0.0.0\n",
    " 0.0.0.0",
    "0.0.0.0 ",
    "[::1]",
    "::1/128",
    "1.2.3",  # inet_aton would read it as 1.2.0.3
    "localhost.",
    "-lab.example.org",
    "lab_1.example.org",
    "lab..example.org",
    "x" * 64 + ".org",
    "\uff10.0.0.0",  # a full-width digit
]
VALID_ADDRESSES = [
    "0.0.0.0", "127.0.0.1", "::", "::1", "fe80::1%lo", "fe80::1%eth0",
    "fe80::1%enp3s0f1.100", "fe80::1%br-1a_2", "fe80::1%3", "localhost",
    "lab-1.example.org", "a1.b2", "2001:db8::1",
]  # fmt: skip


@pytest.mark.parametrize("value", ADDRESS_ATTACKS)
def test_an_address_outside_the_exact_grammar_is_refused(value):
    for name in ("SSH_LISTEN_ADDRESS", "JUPYTER_IP"):
        with pytest.raises(SystemExit, match=f"{name} must be") as info:
            Settings({name: value})
        assert str(info.value).count("\n") == 0


@pytest.mark.parametrize("value", VALID_ADDRESSES)
def test_addresses_with_an_interface_scope_id_are_accepted(value):
    settings = Settings({"SSH_LISTEN_ADDRESS": value, "JUPYTER_IP": value})
    assert settings.ssh_listen_address == settings.jupyter_ip == value


def test_defaults_are_the_image_layout():
    settings = Settings({})
    assert (settings.ssh_port, settings.jupyter_port) == (22, 8888)
    assert settings.ssh_listen_address == settings.jupyter_ip == "0.0.0.0"
    assert settings.stop_timeout == 60
    assert settings.sshd_config == "/run/tfnorm/sshd_config"
    assert os.path.isfile(settings.sshd_template)

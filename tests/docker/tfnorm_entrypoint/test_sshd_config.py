"""docker/tfnorm_entrypoint/sshd_config.py: the template is checked before sshd is
prepared, and the rendered file has exactly the template's lines."""

from __future__ import annotations

import pytest
from tfnorm_entrypoint.settings import Settings
from tfnorm_entrypoint.sshd_config import read_sshd_template, render_sshd_config

HOST_KEYS = ["/keys/ssh_host_ed25519_key", "/keys/ssh_host_ecdsa_key"]


@pytest.mark.parametrize("session_env", [{}, {"TF_X": "1", "PATH": "/bin"}])
def test_the_rendered_sshd_config_has_exactly_the_templates_lines(session_env):
    settings = Settings({"SSH_LISTEN_ADDRESS": "fe80::1%lo"})
    lines = render_sshd_config(settings, HOST_KEYS, session_env).splitlines()
    with open(settings.sshd_template) as handle:
        template = handle.read().splitlines()
    assert len(lines) == len(template) - 1 + len(HOST_KEYS)
    assert [line for line in lines if line.startswith("ListenAddress")] == [
        "ListenAddress fe80::1%lo"
    ]
    assert "PasswordAuthentication no" in lines


# Values that got past the settings' checks (or a changed template) must
# still never reach sshd: the rendered file is checked line by line.
INJECTED = [
    ("ssh_listen_address", "fe80::1%lo\nListenAddress 0.0.0.0\nPasswordAuthentication yes"),
    ("ssh_listen_address", "0.0.0.0\nPasswordAuthentication yes"),
    ("ssh_listen_address", "0.0.0.0\rPasswordAuthentication yes"),
    ("ssh_port", "22\nPasswordAuthentication yes"),
    ("sshd_pid_file_dir", "/run/x\nPermitRootLogin yes"),
    ("host_keys", ["/k\nPasswordAuthentication yes"]),
    ("session_env", {"TF_X": "1\nPasswordAuthentication yes"}),
    ("template", "PasswordAuthentication yes\n"),
    ("template_drop", "PasswordAuthentication no"),
]  # fmt: skip


@pytest.mark.parametrize("where, value", INJECTED)
def test_a_rendered_sshd_config_with_other_lines_is_refused(where, value, tmp_path):
    settings = Settings({})
    host_keys, session_env = list(HOST_KEYS), {}
    template = tmp_path / "sshd_config.template"
    with open(settings.sshd_template) as handle:
        text = handle.read()
    if where == "template":
        text += value
    elif where == "template_drop":
        text = text.replace(value + "\n", "")
    template.write_text(text)
    settings.sshd_template = str(template)
    if where == "host_keys":
        host_keys = value
    elif where == "session_env":
        session_env = value
    elif where == "sshd_pid_file_dir":
        settings.runtime_dir = value
    elif where.startswith("ssh_"):
        setattr(settings, where, value)
    with pytest.raises(SystemExit, match="sshd_config"):
        render_sshd_config(settings, host_keys, session_env)


# Templates TFNORM_SSHD_TEMPLATE may name that cannot be rendered, and what
# the one line says.
BAD_TEMPLATES = [
    ("Port ${port}\nBanner ${banner}\n", "unknown placeholder ${banner}"),
    ("Port $port\nBanner $banner_file\n", "unknown placeholder ${banner_file}"),
    ("Port ${port}\nBanner 5$ a day\n", "'$' that starts no placeholder on line 2"),
    (b"Port ${port}\n# caf\xe9\n", "cannot be read (not UTF-8 text)"),
    (None, "cannot be read (No such file or directory)"),
]


@pytest.mark.parametrize("text, message", BAD_TEMPLATES)
def test_a_template_that_cannot_be_rendered_is_refused_in_one_line(
    text, message, tmp_path
):
    template = tmp_path / "sshd_config.template"
    if isinstance(text, bytes):
        template.write_bytes(text)
    elif text is not None:
        template.write_text(text)
    with pytest.raises(SystemExit) as info:
        read_sshd_template(str(template))
    assert str(info.value).startswith("TFNORM_SSHD_TEMPLATE ")
    assert message in str(info.value) and str(template) in str(info.value)
    assert "\n" not in str(info.value)


def test_the_images_template_uses_only_known_placeholders():
    read_sshd_template(Settings({}).sshd_template)

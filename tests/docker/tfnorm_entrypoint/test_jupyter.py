"""docker/tfnorm_entrypoint/jupyter.py: the token, and JupyterLab of the
running entrypoint over HTTP and in headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat

import pytest
from tfnorm_entrypoint.jupyter import resolve_token, start_jupyter
from tfnorm_entrypoint.settings import Settings

from tests.browser import CHROMIUM, jupyterlab_screenshot
from tests.conftest import REPO
from tests.docker.harness import cmdline, http_status, require_sbin, ssh

# --- the token (no server) -------------------------------------------------


def test_an_empty_token_is_replaced_by_a_generated_one():
    given = resolve_token(Settings({"JUPYTER_TOKEN": "abc"}))
    assert given == ("abc", False)
    first, generated = resolve_token(Settings({"JUPYTER_TOKEN": "  "}))
    second, _ = resolve_token(Settings({}))
    assert generated and len(first) >= 32 and first != second


@pytest.mark.parametrize(
    "token, warned",
    [
        ("abc123", True),
        ("x" * 31, True),
        ("3f9a0c7be14d5286" * 2, False),
        ("", False),
        ("x" * 32, True),  # long, but one character: guessable
        ("ab" * 24, True),
        ("password" * 4, True),  # 7 distinct characters
    ],
)
def test_a_short_or_repetitive_token_starts_with_a_warning_that_does_not_show_it(
    token, warned, tmp_path, capsys
):
    settings = Settings(
        {
            "JUPYTER_TOKEN": token,
            "TFNORM_JUPYTER": "true",  # stands in for `jupyter`: exits at once
            "TFNORM_RUNTIME_DIR": str(tmp_path),
            "TFNORM_WORKSPACE": str(tmp_path),
        }
    )
    assert start_jupyter(settings, {"HOME": str(tmp_path)}).wait() == 0
    warnings = [
        line for line in capsys.readouterr().err.splitlines() if "WARNING" in line
    ]
    if warned:
        assert len(warnings) == 1
        distinct = len(set(token))
        assert re.search(
            rf"JUPYTER_TOKEN has only ({len(token)} characters|{distinct} "
            r"distinct characters)",
            warnings[0],
        ), warnings[0]
        assert token not in warnings[0]
    else:
        assert warnings == []
    with open(settings.jupyter_config) as handle:
        written = json.load(handle)["IdentityProvider"]["token"]
    assert written == token or (not token and len(written) == 48)
    assert stat.S_IMODE(os.stat(settings.jupyter_config).st_mode) == 0o600


# --- JupyterLab of the running entrypoint ------------------------------------


def test_jupyterlab_answers_with_the_token_and_refuses_without(lab):
    assert http_status(lab, "/api/status", lab.token) == 200
    assert http_status(lab, "/api/status", lab.token, query_token=True) == 200
    assert http_status(lab, "/api/status") == 403
    assert http_status(lab, "/api/status", "wrong" + lab.token) == 403


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


def test_the_workload_user_can_read_the_token_as_the_readme_says(lab, client_key):
    """What the README promises is a clean session environment, not secrecy
    from the user JupyterLab runs as: an SSH session of that user reads the
    token from JupyterLab's config file and from `jupyter server list`."""
    config = os.path.join(lab.runtime_dir, "jupyter_token_config.json")
    result = ssh(lab, client_key, f"cat {config}; echo; jupyter server list --json")
    assert result.returncode == 0, result.stderr
    config_line, *servers = result.stdout.splitlines()
    assert json.loads(config_line)["IdentityProvider"]["token"] == lab.token
    listed = [json.loads(line) for line in servers if line.startswith("{")]
    assert lab.token in [server["token"] for server in listed], result.stdout


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

"""Host tools and fixtures for the container checks (no Docker engine needed).

The Docker files do not depend on the Keras runtime, so they are validated by
the keras3 run. In the legacy run these tests would only repeat it and are
skipped; in the tf29 root the host tools (hadolint, compose, sshd, chromium)
do not exist and each test skips naming the tool it lacks.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import socket
import struct
import subprocess
import sys

import pytest

from tests.conftest import REPO, RUNTIME

HERE = os.path.dirname(os.path.abspath(__file__))


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


def load_entrypoint():
    """docker/entrypoint.py as a module (docker/ is not a Python package)."""
    path = os.path.join(REPO, "docker", "entrypoint.py")
    spec = importlib.util.spec_from_file_location("tfnorm_docker_entrypoint", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def entrypoint():
    return load_entrypoint()


CHROMIUM = "/usr/bin/chromium"


def headless_chromium(profile, window_size, budget_ms, screenshot, url):
    """Headless Chromium that dumps the DOM and saves a screenshot of `url`.

    Virtual time lets the page settle without a fixed wait; the flags keep
    it from calling anyone (this machine has no network but loopback).
    """
    return [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--window-size={window_size}",
        f"--virtual-time-budget={budget_ms}",
        f"--screenshot={screenshot}",
        "--dump-dom",
        url,
    ]


def jupyterlab_screenshot(url, tmp_path, width, height, budget_ms, timeout):
    """Opens JupyterLab at `url` in headless Chromium; returns (DOM, PNG bytes)
    after checking Lab's shell rendered and the PNG has the window's size."""
    screenshot = tmp_path / "jupyterlab.png"
    browser = subprocess.run(
        headless_chromium(
            tmp_path / "profile", f"{width},{height}", budget_ms, screenshot, url
        ),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    dom = browser.stdout
    assert "jp-LabShell" in dom, dom[-2000:] + browser.stderr[-2000:]
    assert screenshot.exists(), browser.stderr[-2000:]
    png = screenshot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (width, height)  # the IHDR chunk
    return dom, png

"""JupyterLab in headless Chromium: a screenshot and the rendered DOM.

Shared by the entrypoint's checks (tests/docker/) and the container check
(tests/container/); it imports neither TensorFlow nor tests/conftest.py, so
the container check's processes do not load TensorFlow.
"""

from __future__ import annotations

import struct
import subprocess

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

"""JupyterLab on `JUPYTER_PORT`, rooted at `TFNORM_WORKSPACE`, always with a token.

The token is `JUPYTER_TOKEN`, or one generated at each start and printed once
to the log. It reaches JupyterLab through a private config file: never the
command line (visible in `ps`) nor the environment (inherited by kernels).
That keeps it from other users and from children's environments, not from
the workload user itself, who can read that file (see docs/docker.md).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess

from tfnorm_entrypoint.files import write_private
from tfnorm_entrypoint.log import log

# As long as the generated token (24 random bytes, in hex, are 48 characters);
# shorter ones are accepted with a warning.
RECOMMENDED_TOKEN_LENGTH = 32
# Length alone is no strength: "a" * 32 or "password" * 4 are guessed at
# once. Random hex of 32 characters has 16 distinct ones but for a chance of
# about 1e-5 of fewer than 11; fewer than 8 is a pattern, warned about too.
MIN_DISTINCT_CHARACTERS = 8


def start_jupyter(settings, env):
    write_default_lab_settings(env)
    token, generated = resolve_token(settings)
    if not generated:
        _warn_if_short(token)
    config = {
        "IdentityProvider": {"token": token},
        # No calls home from the container (and no news prompt in the UI).
        "LabApp": {
            "news_url": None,
            "check_for_updates_class": "jupyterlab.NeverCheckForUpdate",
        },
    }
    write_private(settings.jupyter_config, json.dumps(config))
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


def resolve_token(settings):
    """Returns (token, generated): JupyterLab never starts without a token."""
    token = settings.jupyter_token.strip()
    if token:
        return token, False
    return secrets.token_hex(24), True


def _warn_if_short(token):
    """Warns (never showing the token) about a short or repetitive token."""
    if len(token) < RECOMMENDED_TOKEN_LENGTH:
        weakness = f"only {len(token)} characters"
    elif len(set(token)) < MIN_DISTINCT_CHARACTERS:
        weakness = f"only {len(set(token))} distinct characters"
    else:
        return
    log(
        f"WARNING: JUPYTER_TOKEN has {weakness}; anyone who reaches the port "
        "can guess a short or repetitive token. Use at least "
        f"{RECOMMENDED_TOKEN_LENGTH} random characters (`openssl rand -hex "
        "24`), or leave it empty for a generated one"
    )


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
    write_private(
        path, json.dumps({"fetchNews": "false", "checkForUpdates": False}, indent=2)
    )

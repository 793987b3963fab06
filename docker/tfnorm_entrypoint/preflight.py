"""What the services need, checked as the workload user before any starts.

The settings themselves are checked as they are read (`settings.py`); what
depends on the user the entrypoint runs as (a folder it must open) or on
the machine (a program to run) is checked here, so a missing workspace or a
wrong `TFNORM_JUPYTER` stops the entrypoint in one line before sshd starts,
not with a traceback after it.
"""

from __future__ import annotations

import os
import shutil

from tfnorm_entrypoint.accounts import current_account


def executable(value, name):
    """The path of the program `value` names (a path, or a name on PATH)."""
    found = shutil.which(value) if value else None
    if found is None:
        raise SystemExit(
            f"{name} must name a program this user can run (a path, or a "
            f"name on PATH={os.environ.get('PATH', os.defpath)}). Received: {value!r}"
        )
    return found


def check_workspace(path):
    """Stops unless `path` is a directory the user can open and list:
    JupyterLab's root and where SSH logins start."""
    if not os.path.isdir(path):
        raise SystemExit(
            "TFNORM_WORKSPACE must be an existing directory (JupyterLab's root); "
            f"create or mount it. Received: {path!r}"
        )
    if not os.access(path, os.R_OK | os.X_OK):
        account = current_account()
        raise SystemExit(
            f"TFNORM_WORKSPACE cannot be opened by {account.pw_name} (uid "
            f"{account.pw_uid}): give that user read and search permission "
            f"(chmod a+rx, or chown). Received: {path!r}"
        )

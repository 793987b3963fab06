#!/usr/bin/env python3
"""Entrypoint of the tfnorm GPU Jupyter container.

`entrypoint.py` (or `entrypoint.py lab`) runs the container's services as the
non-root workload user:

- **SSH** (key-only) when a valid public key is provided, through the
  read-only mount `TFNORM_AUTHORIZED_KEYS_FILE` or the `SSH_AUTHORIZED_KEYS`
  variable. Host keys are generated once into `TFNORM_SSH_HOST_KEY_DIR` (a
  volume, so fingerprints survive restarts). SSH sessions get the container's
  TensorFlow/CUDA environment (`PATH`, `LD_LIBRARY_PATH`, `CUDA_*`, `TF_*`,
  ...) but not the Jupyter token. Without a key, sshd is not started and the
  log says how to enable it.
- **JupyterLab** on `JUPYTER_PORT`, rooted at `TFNORM_WORKSPACE`, always with a
  token: `JUPYTER_TOKEN`, or a generated one printed once to the log.

`SIGTERM`/`SIGINT` (what `docker stop` sends through tini) are passed to every
process of the workload user (JupyterLab, its kernels, sshd, sessions and
background runs started over SSH); what is still alive after
`TFNORM_STOP_TIMEOUT` seconds is killed. If JupyterLab or sshd exits on its
own, the others are stopped and the entrypoint exits non-zero, so the
container's restart policy applies.

Any other command (`entrypoint.py tensorboard --logdir ...`) runs as the
workload user in place of the entrypoint.

Started as root (compose's one-shot `prepare` service, `docker run -u 0`, or a
test on a host), the entrypoint gives the runtime and host-key directories
themselves (never their entries) and empty root-owned workspace mount points
to `TFNORM_USER`, following no symbolic link, then drops to that user for
good; JupyterLab and sshd never run as root. A workspace folder the user
cannot write is named in the log with its fix.

Every setting is read and checked first: a bad one (a value that is not
UTF-8 text included) stops the entrypoint with a one-line error naming it,
before anything is created or started. What depends on the user (the
workspace it must open) or the machine (the programs to run, the sshd
template) is checked before any service starts, again in one line. Every path is
an environment variable, so the same code runs on a host in tests. The modules
are in `tfnorm_entrypoint/` next to this file. Python 3.8 compatible (the 2.9
image's Python); standard library only.
"""

from __future__ import annotations

import os
import sys

from tfnorm_entrypoint.accounts import (
    account_environment,
    child_environment,
    current_account,
    drop_privileges,
    warn_unwritable_mounts,
)
from tfnorm_entrypoint.jupyter import start_jupyter
from tfnorm_entrypoint.log import log
from tfnorm_entrypoint.preflight import check_workspace, executable
from tfnorm_entrypoint.settings import Settings
from tfnorm_entrypoint.ssh import start_sshd
from tfnorm_entrypoint.supervisor import supervise


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    settings = Settings(os.environ)
    if os.geteuid() == 0:
        drop_privileges(settings)
    elif current_account().pw_name != settings.user:
        log(
            f"running as {current_account().pw_name}, not TFNORM_USER="
            f"{settings.user}; continuing as the current user"
        )
    warn_unwritable_mounts(settings)
    env = child_environment(account_environment(os.environ))
    if argv and argv[0] != "lab":
        run_command(argv, env)
    # Found now, not by JupyterLab's start after sshd's: one line, nothing started.
    check_workspace(settings.workspace)
    executable(settings.jupyter, "TFNORM_JUPYTER")
    os.makedirs(settings.runtime_dir, mode=0o700, exist_ok=True)
    return supervise(
        [
            ("sshd", lambda: start_sshd(settings, env)),
            ("JupyterLab", lambda: start_jupyter(settings, env)),
        ],
        settings.stop_timeout,
    )


def run_command(argv, env):
    """tensorboard, a worker, a shell: the command replaces this process so
    tini's signals reach it directly."""
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as error:
        raise SystemExit(f"cannot run {argv[0]!r}: {error}") from None


if __name__ == "__main__":
    sys.exit(main())

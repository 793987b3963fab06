"""The workload user: dropping root, what a root start prepares, children's environment.

Started as root (compose's one-shot `prepare` service, `docker run -u 0`, a
test on a host), the entrypoint gives the runtime and host-key directories
themselves and empty root-owned workspace mount points to `TFNORM_USER`, then
becomes that user for good. Everything here runs as root inside directories
the workload user can write, so nothing follows a symbolic link and nothing
but a directory itself ever changes owner: a link planted by the user
(`ln -s /etc/shadow <host-key-dir>/x`) must never hand a root file to them.
"""

from __future__ import annotations

import os
import pwd

from tfnorm_entrypoint.files import open_directory, prepare_directory
from tfnorm_entrypoint.log import log
from tfnorm_entrypoint.settings import ENTRYPOINT_ONLY


def drop_privileges(settings):
    """Started as root: prepare our directories, then become the user for good."""
    try:
        account = pwd.getpwnam(settings.user)
    except KeyError:
        raise SystemExit(
            "TFNORM_USER names no existing user. "
            f"Received: TFNORM_USER={settings.user!r}"
        ) from None
    if account.pw_uid == 0:
        raise SystemExit(
            "JupyterLab and sshd must not run as root; set TFNORM_USER to a "
            f"non-root user. Received: TFNORM_USER={settings.user!r}"
        )
    for directory in (settings.runtime_dir, settings.host_key_dir):
        prepare_directory(directory, 0o700, account)
    for directory in settings.workspace_mounts:
        _claim_engine_created_mount(directory, account)
    os.initgroups(account.pw_name, account.pw_gid)
    os.setgid(account.pw_gid)
    os.setuid(account.pw_uid)
    log(f"dropped root privileges: running as {account.pw_name} ({account.pw_uid})")


def _claim_engine_created_mount(path, account):
    """Hands an empty, root-owned mount point to the user.

    Docker and Podman create a missing bind-mount source (`./runs` in a fresh
    clone) as an empty root-owned directory, which the user could not write.
    Only that case is changed: a directory with contents belongs to someone
    on the host, and `warn_unwritable_mounts` says how to fix it.
    """
    descriptor = open_directory(path)
    if descriptor is None:
        return
    try:
        info = os.fstat(descriptor)
        if info.st_uid != 0 or os.listdir(descriptor) or _read_only(descriptor):
            return
        os.fchown(descriptor, account.pw_uid, account.pw_gid)
        log(f"{path}: empty and owned by root; handed to {account.pw_name}")
    finally:
        os.close(descriptor)


def _read_only(descriptor):
    return bool(os.fstatvfs(descriptor).f_flag & os.ST_RDONLY)


def warn_unwritable_mounts(settings):
    """Says in the log which workspace folder the user cannot write, and the fix."""
    account = current_account()
    for path in settings.workspace_mounts:
        descriptor = open_directory(path)
        if descriptor is None:
            continue
        try:
            if _read_only(descriptor) or os.access(path, os.W_OK):
                continue
            owner = os.fstat(descriptor).st_uid
        finally:
            os.close(descriptor)
        # Building the image for the folder's owner helps, unless that owner
        # is root: the services must never run as uid 0.
        rebuild = (
            f", or set TFNORM_UID={owner} (and TFNORM_GID) in .env and "
            "`docker compose build`"
            if owner != 0
            else ""
        )
        log(
            f"WARNING: {path} is not writable by {account.pw_name} (uid "
            f"{account.pw_uid}); it belongs to uid {owner}. Fix on the host: "
            f"`sudo chown -R {account.pw_uid}:{account.pw_gid}` on the folder "
            f"mounted there{rebuild} (see docs/troubleshooting.md)"
        )


def current_account():
    try:
        return pwd.getpwuid(os.getuid())
    except KeyError:
        raise SystemExit(
            f"UID {os.getuid()} has no account in this image (e.g. compose's "
            "`user:`); build the image with --build-arg TFNORM_UID/TFNORM_GID "
            "instead"
        ) from None


def account_environment(environ):
    """The environment with HOME/USER/SHELL of the user this process runs as."""
    account = current_account()
    env = dict(environ)
    env.update(
        HOME=account.pw_dir,
        USER=account.pw_name,
        LOGNAME=account.pw_name,
        SHELL=account.pw_shell or "/bin/sh",
    )
    return env


def child_environment(environ):
    """`environ` without the variables only the entrypoint may read."""
    return {k: v for k, v in environ.items() if k not in ENTRYPOINT_ONLY}

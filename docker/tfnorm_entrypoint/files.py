"""Files and directories changed without following symbolic links.

The entrypoint works in directories its user can write (the host-key volume,
the runtime directory, the home, the workspace), so a link may have been
planted in any of them: no write, mode change or ownership change here ever
goes through one.
"""

from __future__ import annotations

import os
import stat


def check_parents(path):
    """Refuses `path` when a directory above it is a link someone else owns.

    A custom host-key or runtime path (`/workspace/keys/ssh`) may run through
    a directory the user can write, where they can put a link to any place
    (`/workspace/keys -> /etc`): a root start would then create, chown and
    chmod there. Links owned by root (`/var/run -> /run`) or by this process's
    own user are trusted; any other is refused. Components that do not exist
    yet are fine: they are created as real directories.
    """
    parts = os.path.abspath(path).split(os.sep)[1:-1]
    current = os.sep
    for part in parts:
        current = os.path.join(current, part)
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(info.st_mode) and info.st_uid not in (0, os.geteuid()):
            raise SystemExit(
                f"{path} lies under {current}, a symbolic link owned by uid "
                f"{info.st_uid}, not root; a root start must not follow it. "
                "Replace the link by the real directory and restart"
            )


def open_directory(path):
    """A descriptor of `path` if it is a real directory (never via a link), else None."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None


def prepare_directory(path, mode, account=None):
    """Creates `path` if missing and gives the directory itself `mode` (and
    `account` as its owner); its entries are left alone."""
    check_parents(path)
    os.makedirs(path, mode=mode, exist_ok=True)
    check_parents(path)  # again: a link may have been put in meanwhile
    descriptor = open_directory(path)
    if descriptor is None:
        raise SystemExit(
            f"{path} is not a directory (a symbolic link?); remove it and restart"
        )
    try:
        if account is not None and os.fstat(descriptor).st_uid != account.pw_uid:
            os.fchown(descriptor, account.pw_uid, account.pw_gid)
        os.fchmod(descriptor, mode)
    finally:
        os.close(descriptor)


def set_file_mode(path, mode):
    """`chmod` of a regular file that refuses a link or anything else in its place."""
    check_parents(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        descriptor = None
    try:
        if descriptor is None or not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise SystemExit(
                f"{path} is not a regular file (a symbolic link?); remove it and "
                "restart"
            )
        os.fchmod(descriptor, mode)
    finally:
        if descriptor is not None:
            os.close(descriptor)


def write_private(path, text, mode=0o600):
    """Replaces `path` by a new file of `mode` holding `text`, atomically.

    The temporary file is created exclusively, so a link planted under its
    name is refused rather than written through; the rename then replaces a
    link at `path` itself instead of following it.
    """
    check_parents(path)
    temporary = f"{path}.tmp{os.getpid()}"
    if os.path.lexists(temporary):
        os.remove(temporary)
    descriptor = os.open(
        temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode
    )
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        # The umask may have narrowed `mode` (0o644 files must stay readable).
        os.fchmod(handle.fileno(), mode)
        handle.write(text)
    os.replace(temporary, path)

"""Writing a run's files without following links.

Checkpoint directories and logdirs are often shared (a team's `runs/`), so
anyone who can write there may replace a run file by a link to a file of
the user who trains: a lock file linked to `~/.ssh/id_ed25519` would get
the key printed into the run's log and then emptied. So:

* files rewritten whole (`summary.json`, `run_config.json`, the vocabulary,
  the checkpoint state file) are written to a new file created beside them
  (`O_EXCL`, so never through a link planted at that name) and renamed over
  the old one; a rename replaces a link and leaves its target alone;
* files written in place (the lock, the `--log-file`) are opened with
  `O_NOFOLLOW` and must be regular files with one name: a symbolic link,
  a hard link or a FIFO is refused with `UnsafeFileError` naming the path;
* `refuse_links` lets a run refuse links among its files before it writes
  anything, so the user gets one clear error instead of a replaced link.

Only the last component of a path is checked: a logdir that is itself a
symbolic link to a bigger disk is the user's choice and keeps working.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import stat

import numpy as np


class UnsafeFileError(OSError):
    """A run file is a link or not a regular file; nothing was written to it."""

    def __init__(self, path, problem):
        super().__init__(
            errno.ELOOP,
            f"{path} is {problem}; a run writes only to its own plain files "
            "(never through a link, never into a FIFO or device). Remove it "
            "(or use another directory)",
            path,
        )

    def __str__(self):
        return self.strerror


def file_sha256(path):
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def refuse_links(paths):
    """Raises `UnsafeFileError` for the first of `paths` that is a symbolic link.

    Paths that do not exist are fine: the run creates them.
    """
    for path in paths:
        if os.path.islink(path):
            raise UnsafeFileError(path, "a symbolic link")


def open_in_place(path, flags, mode=0o666):
    """`os.open(path, flags)` for a file written in place; returns the descriptor.

    Never follows a symbolic link, never blocks on a FIFO, and refuses a
    file that has other names (a hard link) or is not a regular file.

    Raises:
        UnsafeFileError: `path` is a link or not a regular file.
        OSError: it cannot be opened for another reason.
    """
    # O_NONBLOCK: opening a FIFO for writing would wait for a reader forever.
    extra = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(path, flags | extra, mode)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnsafeFileError(path, "a symbolic link") from None
        if error.errno == errno.ENXIO:  # a FIFO without a reader
            raise UnsafeFileError(path, "not a regular file") from None
        raise
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFileError(path, "not a regular file")
        if info.st_nlink > 1:
            raise UnsafeFileError(path, f"a hard link ({info.st_nlink} names)")
        os.set_blocking(descriptor, True)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def atomic_write_text(path, text):
    """Writes `text` to `path` through a new file beside it and a rename.

    A reader (or a rerun after `kill -9`) sees the old file or the new one,
    never half of one; a link at `path` is replaced, its target untouched;
    a failed write leaves no temporary file behind. The temporary name is
    `<path>.tmp<pid>.<random>`, created exclusively.
    """
    directory = os.path.dirname(path) or "."
    for _ in range(100):
        temporary = f"{path}.tmp{os.getpid()}.{secrets.token_hex(4)}"
        try:
            # The mode before the umask, as open(path, "w") would create it.
            descriptor = os.open(
                temporary,
                os.O_WRONLY
                | os.O_CREAT
                | os.O_EXCL
                | os.O_NOFOLLOW
                | getattr(os, "O_CLOEXEC", 0),
                0o666,
            )
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(errno.EEXIST, "no free temporary name", directory)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.lexists(temporary):
            os.remove(temporary)
        raise


def atomic_write_json(path, values):
    """Writes `values` as indented JSON, atomically (see `atomic_write_text`);
    NumPy numbers are written as plain numbers."""
    text = json.dumps(values, indent=2, default=_json_value) + "\n"
    atomic_write_text(path, text)


def _json_value(value):
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return str(value)

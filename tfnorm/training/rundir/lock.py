"""`DirectoryLock`: keeps a second run off a run directory."""

from __future__ import annotations

import os
import socket

from tfnorm._safe_io import open_in_place


class DirectoryLockedError(RuntimeError):
    """Another live process holds the lock; `holder` is its lock-file text."""

    def __init__(self, message, holder):
        super().__init__(message)
        self.holder = holder


class DirectoryLock:
    """An exclusive `flock` on `directory/LOCK_FILE`, naming its holder.

    The kernel drops a `flock` when its process dies, however it dies, so a
    lock left by a `kill -9` is never mistaken for a live one: the file still
    names the dead holder, and the next run takes over with a warning.
    (`flock` is reliable on local file systems; on NFS it depends on the
    server.)
    """

    LOCK_FILE = "tfnorm.lock"

    def __init__(self, directory):
        self.path = os.path.join(directory, self.LOCK_FILE)
        self._handle = None

    def acquire(self):
        """Takes the lock; returns the stale holder's text taken over, or None.

        Raises:
            DirectoryLockedError: a live process holds it.
            UnsafeFileError: the lock file is a link or not a regular file
                (nothing is read from or written to it).
            OSError: the lock file cannot be created.
        """
        import fcntl

        # Never through a link: someone else's file would be shown in the
        # log (as the "holder") and then emptied.
        descriptor = open_in_place(self.path, os.O_RDWR | os.O_CREAT)
        handle = os.fdopen(descriptor, "r+", encoding="utf-8", errors="replace")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(handle)
            handle.close()
            raise DirectoryLockedError(
                f"{os.path.dirname(self.path)} is in use by another run "
                f"({holder or 'holder unknown'}; lock file {self.path})",
                holder,
            ) from None
        stale = _read_holder(handle)
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"host {socket.gethostname()} pid {os.getpid()}\n")
            handle.flush()
        except OSError:
            handle.close()  # releases the lock too
            raise
        self._handle = handle
        return stale or None

    def release(self):
        """Empties the lock file (an empty file means "free") and unlocks."""
        if self._handle is None:
            return
        try:
            self._handle.seek(0)
            self._handle.truncate()
        except OSError:
            pass  # a full disk must not hide the run's own error
        self._handle.close()
        self._handle = None


def _read_holder(handle):
    """The holder's line ("host H pid P"): at most one short line of the file."""
    handle.seek(0)
    text = handle.read(_HOLDER_CHARS).strip()
    first = text.splitlines()[0] if text else ""
    return "".join(c for c in first if c.isprintable())[:_HOLDER_CHARS]


# More than a host name (at most 253) and a pid take.
_HOLDER_CHARS = 300

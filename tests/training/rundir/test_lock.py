"""`tfnorm.training.rundir.lock`: `DirectoryLock` keeps a second run off a run
directory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO
from tfnorm.training.rundir.lock import DirectoryLock


def test_lock_refuses_a_second_holder_and_names_the_first(tmp_path):
    first = DirectoryLock(str(tmp_path))
    assert first.acquire() is None
    # flock locks belong to open files: a second process is the real test.
    code = textwrap.dedent(
        f"""
        from tfnorm.training.rundir.lock import DirectoryLock, DirectoryLockedError
        try:
            DirectoryLock({str(tmp_path)!r}).acquire()
        except DirectoryLockedError as error:
            print("refused:", error)
        """
    )
    output = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=REPO),
        check=True,
    ).stdout
    assert f"pid {os.getpid()}" in output and "refused" in output
    first.release()
    assert (tmp_path / "tfnorm.lock").read_text() == ""


def test_a_dead_holder_lock_is_taken_over_and_reported(tmp_path):
    code = textwrap.dedent(
        f"""
        import os
        from tfnorm.training.rundir.lock import DirectoryLock
        DirectoryLock({str(tmp_path)!r}).acquire()
        os._exit(0)  # dies holding it, as after kill -9
        """
    )
    subprocess.run(
        [sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=REPO), check=True
    )
    assert "pid" in (tmp_path / "tfnorm.lock").read_text()
    lock = DirectoryLock(str(tmp_path))
    stale = lock.acquire()
    assert stale and "pid" in stale and f"pid {os.getpid()}" not in stale
    lock.release()


@pytest.mark.parametrize("kind", ["symlink", "hard link"])
def test_a_linked_lock_file_is_refused_and_its_target_left_as_it_was(tmp_path, kind):
    # A shared directory: someone links the lock to another user's file.
    secret = tmp_path / "id_ed25519"
    secret.write_text("private key\n")
    directory = tmp_path / "checkpoints"
    directory.mkdir()
    lock_path = directory / "tfnorm.lock"
    if kind == "symlink":
        lock_path.symlink_to(secret)
    else:
        os.link(secret, lock_path)
    lock = DirectoryLock(str(directory))
    with pytest.raises(OSError) as info:
        lock.acquire()
    assert str(lock_path) in str(info.value) and "private key" not in str(info.value)
    lock.release()
    assert secret.read_text() == "private key\n"


def test_a_lock_holders_text_is_shown_as_one_short_line(tmp_path):
    # Whatever the file holds, at most one line of it reaches the run's log.
    (tmp_path / "tfnorm.lock").write_text("host a pid 1\n" + "x" * 5000 + "\nmore\n")
    lock = DirectoryLock(str(tmp_path))
    stale = lock.acquire()
    lock.release()
    assert stale == "host a pid 1"

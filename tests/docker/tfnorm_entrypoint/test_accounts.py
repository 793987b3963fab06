"""docker/tfnorm_entrypoint/accounts.py: a root start prepares only what it
must, follows no link, and drops to the workload user for good."""

from __future__ import annotations

import os
import pathlib
import tempfile

import pytest
from tfnorm_entrypoint.accounts import child_environment, drop_privileges
from tfnorm_entrypoint.settings import Settings

from tests.docker.harness import run_command_as_root


def test_the_workload_user_must_not_be_root():
    with pytest.raises(SystemExit, match=r"must not run as root.*TFNORM_USER='root'"):
        drop_privileges(Settings({"TFNORM_USER": "root"}))


def test_children_never_get_the_entrypoint_only_variables():
    environ = {"JUPYTER_TOKEN": "t", "SSH_AUTHORIZED_KEYS": "k", "PATH": "/bin"}
    assert child_environment(environ) == {"PATH": "/bin"}


def test_a_root_start_never_hands_a_linked_file_to_the_user(user, tmp_path):
    """The attack: from a shell of the user, plant links to a root-only file in
    the directories a root start prepares, then wait for the next start."""
    secret = tmp_path / "shadow"
    secret.write_text("root only\n")
    os.chmod(secret, 0o600)
    os.chmod(tmp_path, 0o755)
    planted = []
    for directory in ("hostkeys", "run"):
        folder = os.path.join(user.base, directory)
        os.makedirs(folder, exist_ok=True)
        os.chown(folder, user.uid, user.gid)
        planted.append(os.path.join(folder, "x"))
    nested = os.path.join(user.base, "hostkeys", "sub")
    os.makedirs(nested, exist_ok=True)
    planted.append(os.path.join(nested, "y"))
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    planted.append(str(workspace / "runs"))  # a mount point replaced by a link
    for link in planted:
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(secret, link)
        os.lchown(link, user.uid, user.gid)
    try:
        assert run_command_as_root(user, str(workspace)).stdout.strip() == user.name
        info = os.stat(secret)
        assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (0, 0, 0o600)
        assert secret.read_text() == "root only\n"
    finally:
        for link in planted:
            os.remove(link)


def test_a_root_start_refuses_a_link_in_place_of_its_own_directories(user, tmp_path):
    """The runtime directory replaced by a link to a root directory: the
    root start stops, naming it, and the directory keeps its owner and mode."""
    root_only = tmp_path / "root-only"
    root_only.mkdir(mode=0o700)
    runtime = tmp_path / "run"
    runtime.symlink_to(root_only)
    with pytest.raises(AssertionError, match=f"{runtime} is not a directory"):
        run_command_as_root(user, str(tmp_path), runtime_dir=str(runtime))
    info = root_only.stat()
    assert (info.st_uid, info.st_mode & 0o777) == (0, 0o700)


def test_a_root_start_hands_over_only_empty_engine_created_mounts(user):
    """A fresh clone has no runs/ or data/: the engine creates them empty and
    root-owned. Those become the user's; a folder with contents is left as
    it is, and the log says how to fix it."""
    # Under the user's base folder: the user must reach it (tmp_path is not).
    workspace = pathlib.Path(tempfile.mkdtemp(dir=user.base)) / "workspace"
    for name in ("notebooks", "data", "runs"):
        (workspace / name).mkdir(parents=True)
    (workspace / "notebooks" / "mine.ipynb").write_text("{}")
    for folder in (workspace.parent, workspace, workspace / "notebooks"):
        os.chmod(folder, 0o755)
    result = run_command_as_root(
        user, str(workspace), f"touch {workspace}/runs/r {workspace}/data/d"
    )
    assert os.stat(workspace / "runs").st_uid == user.uid
    assert os.stat(workspace / "data").st_uid == user.uid
    assert os.stat(workspace / "runs" / "r").st_uid == user.uid
    assert os.stat(workspace / "notebooks").st_uid == 0
    assert os.stat(workspace / "notebooks" / "mine.ipynb").st_uid == 0
    warning = [line for line in result.stderr.splitlines() if "WARNING" in line]
    assert len(warning) == 1, result.stderr
    assert str(workspace / "notebooks") in warning[0]
    assert f"chown -R {user.uid}:{user.gid}" in warning[0]
    # The folder is root's: the advice is chown, never to run as uid 0.
    assert "TFNORM_UID=0" not in warning[0] and "TFNORM_UID" not in warning[0]

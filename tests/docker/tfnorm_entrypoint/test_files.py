"""docker/tfnorm_entrypoint/files.py: no write or mode change goes through a link."""

from __future__ import annotations

import os
import stat

import pytest
from tfnorm_entrypoint.files import prepare_directory, set_file_mode, write_private


@pytest.fixture
def victim(tmp_path):
    """A file a planted link points to: it must stay as it is."""
    path = tmp_path / "victim"
    path.write_text("untouched\n")
    path.chmod(0o640)
    return path


def assert_untouched(victim):
    assert victim.read_text() == "untouched\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o640


def test_write_private_replaces_a_link_instead_of_writing_through_it(tmp_path, victim):
    target = tmp_path / "authorized_keys"
    target.symlink_to(victim)
    # A link planted under the temporary name this process would use.
    (tmp_path / f"authorized_keys.tmp{os.getpid()}").symlink_to(victim)
    write_private(str(target), "ssh-ed25519 AAAA\n")
    assert not target.is_symlink() and target.read_text() == "ssh-ed25519 AAAA\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(os.listdir(tmp_path)) == ["authorized_keys", "victim"]
    assert_untouched(victim)


def test_write_private_sets_the_mode_whatever_the_umask(tmp_path):
    previous = os.umask(0o077)
    try:
        write_private(str(tmp_path / "session-env.sh"), "export A=1\n", mode=0o644)
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "session-env.sh").stat().st_mode) == 0o644


def test_set_file_mode_refuses_a_link(tmp_path, victim):
    link = tmp_path / "ssh_host_ed25519_key"
    link.symlink_to(victim)
    with pytest.raises(SystemExit, match=f"{link} is not a regular file"):
        set_file_mode(str(link), 0o600)
    assert_untouched(victim)


def test_prepare_directory_refuses_a_link_and_sets_the_mode_of_a_real_one(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    link = tmp_path / ".ssh"
    link.symlink_to(elsewhere)
    with pytest.raises(SystemExit, match=rf"{link} is not a directory"):
        prepare_directory(str(link), 0o700)
    assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o755
    real = tmp_path / "home" / ".ssh"
    prepare_directory(str(real), 0o700)
    prepare_directory(str(real), 0o700)  # an existing one is fine
    assert stat.S_IMODE(real.stat().st_mode) == 0o700


def _planted_parent(tmp_path, owner):
    """`tmp_path/keys`, a link to `tmp_path/elsewhere` owned by `owner`."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    link = tmp_path / "keys"
    link.symlink_to(elsewhere)
    if owner != os.geteuid():
        os.lchown(link, owner, owner)
    return link, elsewhere


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a link another owner")
@pytest.mark.parametrize(
    "change",
    [
        lambda path: prepare_directory(str(path / "ssh"), 0o700),
        lambda path: write_private(str(path / "ssh" / "authorized_keys"), "key\n"),
        lambda path: set_file_mode(str(path / "ssh" / "host_key"), 0o600),
    ],
    ids=["prepare_directory", "write_private", "set_file_mode"],
)
def test_a_parent_link_owned_by_a_user_is_not_followed_by_root(tmp_path, change):
    # SSH_HOST_KEY_DIR=/workspace/keys/ssh with /workspace/keys -> /etc.
    link, elsewhere = _planted_parent(tmp_path, owner=1000)
    (elsewhere / "ssh").mkdir()
    (elsewhere / "ssh" / "host_key").write_text("k\n")
    with pytest.raises(
        SystemExit, match=rf"lies under {link}, a symbolic link owned by uid 1000"
    ):
        change(link)
    assert sorted(os.listdir(elsewhere / "ssh")) == ["host_key"]
    assert stat.S_IMODE((elsewhere / "ssh").stat().st_mode) == 0o755


def test_a_parent_link_owned_by_root_or_this_user_is_followed(tmp_path):
    # /var/run -> /run: the system's own links are trusted.
    link, elsewhere = _planted_parent(tmp_path, owner=os.geteuid())
    prepare_directory(str(link / "ssh"), 0o700)
    assert stat.S_IMODE((elsewhere / "ssh").stat().st_mode) == 0o700

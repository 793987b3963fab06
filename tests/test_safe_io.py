"""`tfnorm._safe_io`: a run's files are written without following links.

The attack: in a shared directory someone replaces a run file (or the
temporary name it is written through) by a link to a file of the user who
runs training. Every case must leave the link's target byte for byte as it
was; files opened in place refuse the link with an error naming the path.
"""

from __future__ import annotations

import hashlib
import os

import pytest

from tfnorm import _safe_io as files

SECRET = "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n"


@pytest.fixture
def secret(tmp_path):
    path = tmp_path / "id_ed25519"
    path.write_text(SECRET)
    return path


def test_atomic_write_replaces_a_symlink_and_leaves_its_target(tmp_path, secret):
    path = tmp_path / "summary.json"
    path.symlink_to(secret)
    files.atomic_write_text(str(path), "{}\n")
    assert not path.is_symlink() and path.read_text() == "{}\n"
    assert secret.read_text() == SECRET


def test_atomic_write_never_writes_through_a_planted_temporary_name(tmp_path, secret):
    # The earlier temporary name was `<path>.tmp<pid>`, which anyone can guess.
    path = tmp_path / "summary.json"
    for name in (f"summary.json.tmp{os.getpid()}", "summary.json.tmp"):
        (tmp_path / name).symlink_to(secret)
    files.atomic_write_text(str(path), "{}\n")
    assert path.read_text() == "{}\n" and secret.read_text() == SECRET
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(
        ["id_ed25519", "summary.json", f"summary.json.tmp{os.getpid()}"]
        + ["summary.json.tmp"]
    )


def test_atomic_write_keeps_the_usual_file_mode(tmp_path):
    path = tmp_path / "summary.json"
    files.atomic_write_text(str(path), "{}\n")
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize("kind", ["symlink", "dangling symlink", "hard link"])
def test_open_in_place_refuses_a_link_naming_the_path(tmp_path, secret, kind):
    path = tmp_path / "tfnorm.lock"
    if kind == "symlink":
        path.symlink_to(secret)
    elif kind == "dangling symlink":
        path.symlink_to(tmp_path / "missing")
    else:
        os.link(secret, path)
    with pytest.raises(files.UnsafeFileError) as info:
        files.open_in_place(str(path), os.O_RDWR | os.O_CREAT)
    assert str(path) in str(info.value) and "link" in str(info.value)
    assert info.value.filename == str(path)
    assert secret.read_text() == SECRET
    assert not (tmp_path / "missing").exists()


def test_open_in_place_refuses_a_fifo_without_blocking(tmp_path):
    path = tmp_path / "train.log"
    os.mkfifo(path)
    with pytest.raises(files.UnsafeFileError, match="not a regular file"):
        files.open_in_place(str(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT)


def test_open_in_place_creates_and_reopens_a_plain_file(tmp_path):
    path = tmp_path / "train.log"
    for text in ("one\n", "two\n"):
        descriptor = files.open_in_place(
            str(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT
        )
        os.write(descriptor, text.encode())
        os.close(descriptor)
    assert path.read_text() == "one\ntwo\n"


def test_refuse_links_names_the_first_link(tmp_path, secret):
    plain = tmp_path / "run_config.json"
    plain.write_text("{}")
    link = tmp_path / "summary.json"
    link.symlink_to(secret)
    files.refuse_links([str(plain), str(tmp_path / "absent")])
    with pytest.raises(files.UnsafeFileError, match="summary.json is a symbolic link"):
        files.refuse_links([str(plain), str(link)])


def test_file_sha256_is_the_hash_of_the_bytes(tmp_path):
    path = tmp_path / "data.csv"
    path.write_bytes(b"text,label\n" * 100000)
    expected = hashlib.sha256(b"text,label\n" * 100000).hexdigest()
    assert files.file_sha256(str(path)) == expected

"""tests/progress.py: a quiet or distributed run says which file it is in."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import tests.conftest
import tests.progress
from tests.conftest import REPO
from tests.test_docs import README

# The line each file gets when its first test starts: minutes and seconds
# since the start, the file, its number and how many there are.
PROGRESS_LINE = r"\[ *\d+:\d\d\] (\S+\.py) \(file (\d+) of (\d+)\)"


def test_the_suite_registers_the_progress_hooks():
    for name in ("pytest_configure", "pytest_runtest_logstart"):
        assert getattr(tests.conftest, name) is getattr(tests.progress, name)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_quiet_run_names_each_file_once_with_the_time_and_the_count(
    workers, tmp_path
):
    distribute = []
    if workers != "0":
        pytest.importorskip("xdist", reason="pytest-xdist runs `make test`")
        distribute = ["-n", workers]
    for name in ("test_one", "test_two", "test_three"):
        (tmp_path / f"{name}.py").write_text(
            "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n"
        )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.progress"]
        + ["-p", "no:cacheprovider", *distribute, str(tmp_path)],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=REPO),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = re.findall(f"^{PROGRESS_LINE}$", result.stdout, re.M)
    assert sorted(name for name, _, _ in lines) == [
        "test_one.py",
        "test_three.py",
        "test_two.py",
    ], result.stdout
    assert [(number, total) for _, number, total in lines] == [
        ("1", "3"),
        ("2", "3"),
        ("3", "3"),
    ]
    assert "6 passed" in result.stdout


def test_the_readme_says_how_long_make_test_takes_and_shows_its_progress_line():
    with open(README, encoding="utf-8") as handle:
        text = " ".join(handle.read().split())
    said = re.search(
        r"`make test` runs about [\d,]+ tests .*? it took (\d+) minutes", text
    )
    assert said, "the README does not say how long `make test` takes"
    example = re.search(f"`{PROGRESS_LINE}`", text)
    assert example, "the README does not show the line each test file gets"
    assert os.path.isfile(os.path.join(REPO, example.group(1)))

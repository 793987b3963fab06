"""tests/suite_parts.py: `--suite-part K/N` shares the suite's files out."""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys

import pytest

import tests.conftest
import tests.suite_parts
from tests.conftest import REPO, RUNTIME
from tests.suite_parts import parse_part, part_files, suite_files


def test_the_suite_registers_the_part_hooks():
    for name in ("pytest_addoption", "pytest_ignore_collect", "pytest_sessionfinish"):
        assert getattr(tests.conftest, name) is getattr(tests.suite_parts, name)


def test_the_parts_cover_every_file_once_and_interleave():
    files = suite_files()
    assert pathlib.Path(__file__).resolve() in files
    parts = [part_files(files, k, 3) for k in (1, 2, 3)]
    assert sorted(sum(parts, [])) == files
    assert parts[0][:2] == [files[0], files[3]]
    assert max(map(len, parts)) - min(map(len, parts)) <= 1


@pytest.mark.parametrize("text", ["0/3", "4/3", "2", "a/b", "1/0", ""])
def test_a_bad_part_names_the_option_and_the_value(text):
    with pytest.raises(argparse.ArgumentTypeError, match="--suite-part takes K/N"):
        parse_part(text)


# Each starts pytest (and TensorFlow) afresh; the hooks are plain pytest,
# and the compat runtimes' own runs are made of parts.
in_keras3_only = pytest.mark.skipif(
    RUNTIME != "keras3",
    reason="runtime-independent: the keras3 run tests the parts' processes; "
    f"this {RUNTIME} run is made of parts itself",
)


@in_keras3_only
def test_a_part_collects_only_its_files():
    """Two collecting processes over tests/settings: together every test of
    the folder, none twice."""

    def collected(option):
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
             "no:cacheprovider", *option, "tests/settings"],
            cwd=REPO, capture_output=True, text=True, check=True,
        )  # fmt: skip
        return {line for line in result.stdout.splitlines() if "::" in line}

    whole = collected([])
    first, second = (
        collected(["--suite-part", "1/2"]),
        collected(["--suite-part", "2/2"]),
    )
    assert first and second and not first & second
    assert first | second == whole


@in_keras3_only
def test_a_part_without_a_selected_test_passes():
    """`-m slow` over tests/settings (no slow test there): the part selects
    nothing and exits 0 (pytest alone exits 5 when nothing runs)."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-m", "slow", "--suite-part", "1/2", "tests/settings"],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "deselected" in result.stdout

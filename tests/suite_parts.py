"""`pytest --suite-part K/N`: this process runs the K-th of N parts of the
suite's test files (every N-th file of the sorted list, starting at the K-th).

Why: one pytest process of a TensorFlow runtime keeps what every test traced
and compiled for its whole life, and grows past 8 GB over the suite. Two such
processes side by side (`make test-compat`) left the subprocesses that tests
start (a README block, a reload in a fresh process) so little memory that the
page cache thrashed and a 13-second block ran past its 300-second limit.
Parts in processes of their own keep each one small; taken together they run
every file exactly once, and a file added later lands in some part by itself.
Interleaving rather than cutting the list in runs spreads a heavy folder
(tests/cli, tests/models) over the parts. tests/conftest.py registers these
hooks.
"""

from __future__ import annotations

import argparse
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent


def parse_part(text):
    """(K, N) from "K/N", 1 <= K <= N; an argparse error naming the value."""
    try:
        part, parts = (int(number) for number in text.split("/"))
    except ValueError:
        part = parts = 0
    if not 1 <= part <= parts:
        raise argparse.ArgumentTypeError(
            f"--suite-part takes K/N with 1 <= K <= N (e.g. 2/3). Received: {text!r}"
        )
    return part, parts


def suite_files(root=TESTS):
    """Every test file under `root`, sorted as paths (pytest's order)."""
    return sorted(root.rglob("test_*.py"))


def part_files(files, part, parts):
    """The files of part `part` of `parts`: every `parts`-th, from the `part`-th."""
    return files[part - 1 :: parts]


def pytest_addoption(parser):
    parser.addoption(
        "--suite-part",
        type=parse_part,
        default=None,
        metavar="K/N",
        help="run only the K-th of N interleaved parts of the suite's test files",
    )


def pytest_ignore_collect(collection_path, config):
    chosen = config.getoption("suite_part")
    if chosen is None or not collection_path.name.startswith("test_"):
        return None
    if (
        collection_path.suffix != ".py"
        or TESTS not in collection_path.resolve().parents
    ):
        return None
    if not hasattr(config, "_suite_part_files"):
        config._suite_part_files = set(part_files(suite_files(), *chosen))
    return collection_path.resolve() not in config._suite_part_files or None


def pytest_sessionfinish(session, exitstatus):
    # A part may hold no test of a selection (`-m slow` over a few files):
    # that part passed; the parts together are what must run everything.
    if session.config.getoption("suite_part") and exitstatus == 5:
        session.exitstatus = 0

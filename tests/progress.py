"""Where a quiet or distributed run of the suite is: one line per test file.

`make test` runs `pytest -q` over two xdist workers: pytest itself then
prints dots only, which for a run of half an hour says neither where it is
nor which file is slow. These hooks add, in the process that prints (the
xdist controller, or pytest itself with `-n 0`), one line when a file's
first test starts:

    [  4:05] tests/layers/test_rms_norm.py (file 12 of 131)

the time since the session started, the file, and how many files there are.
A verbose run names every test anyway, and a plain `-n 0` run names each
file itself, so nothing is added there. tests/conftest.py registers these
hooks; `-p tests.progress` loads them on their own (tests/test_progress.py).
"""

from __future__ import annotations

import time

import pytest


class _Progress:
    """The state of one session's progress lines."""

    def __init__(self, config):
        self.config = config
        self.started = time.monotonic()
        self.files_seen = set()
        self.file_count = None

    def enabled(self):
        verbosity = self.config.getoption("verbose")
        distributed = bool(getattr(self.config.option, "numprocesses", None))
        return verbosity < 0 or (verbosity == 0 and distributed)

    def count(self, node_ids):
        files = {node_id.split("::")[0] for node_id in node_ids}
        self.file_count = max(self.file_count or 0, len(files))

    def file_started(self, node_id):
        path = node_id.split("::")[0]
        if path in self.files_seen or not self.enabled():
            return
        self.files_seen.add(path)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        # After a row of dots, a line of its own (write_line only breaks
        # the line after a file name pytest wrote itself).
        if reporter._tw.width_of_current_line:
            reporter.write("\n")
        minutes, seconds = divmod(int(time.monotonic() - self.started), 60)
        of_total = f" of {self.file_count}" if self.file_count else ""
        reporter.write_line(
            f"[{minutes:3d}:{seconds:02d}] {path} "
            f"(file {len(self.files_seen)}{of_total})"
        )


# The progress of this process's session: pytest runs one per process.
_session = []


def pytest_configure(config):
    # xdist workers report to the controller, which prints: they add nothing.
    if not hasattr(config, "workerinput"):
        _session[:] = [_Progress(config)]


def pytest_collection_finish(session):
    for progress in _session:
        progress.count(item.nodeid for item in session.items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    for progress in _session:
        progress.count(ids)


def pytest_runtest_logstart(nodeid, location):
    for progress in _session:
        progress.file_started(nodeid)

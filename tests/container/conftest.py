"""The real container check: `make test-container` (root, Podman, Compose v2).

These tests build the image on stand-ins for TensorFlow's GPU Jupyter images
and run the README's workflow against it. They are marked `container`, which
`make test` deselects; `make test-container` runs them inside
tools/container/engine.sh, which provides the engine (DOCKER_HOST).

At the end pytest prints a table of every check and the time of each phase.
"""

from __future__ import annotations

import os

import pytest

from tests.container.harness import (
    PHASES,
    build_standins_ahead,
    plan_turns,
    prune_unused_layers,
    stop_builds_ahead,
)

HERE = os.path.dirname(os.path.abspath(__file__))
_checks = []


def pytest_collection_modifyitems(config, items):
    for item in items:
        if str(item.fspath).startswith(HERE + os.sep):
            item.add_marker(pytest.mark.container)


def pytest_runtest_logreport(report):
    if not str(report.fspath).startswith(os.path.relpath(HERE)) and not str(
        report.fspath
    ).startswith(HERE):
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _checks.append((report.nodeid.split("::")[-1], report.outcome, report.duration))


def pytest_sessionfinish(session):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        # A pytest-xdist worker: its phases go to the controller's table.
        workeroutput["container_phases"] = PHASES
    elif _checks and os.environ.get("DOCKER_HOST"):
        prune_unused_layers()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    PHASES.extend(getattr(node, "workeroutput", {}).get("container_phases", ()))


def pytest_terminal_summary(terminalreporter):
    if not _checks and not PHASES:
        return
    write = terminalreporter.write_line
    terminalreporter.section("container checks")
    width = max(len(name) for name, _, _ in _checks) if _checks else 10
    for name, outcome, duration in _checks:
        write(f"  {name:<{width}}  {outcome:<7}  {duration:7.1f}s")
    terminalreporter.section("container phases")
    width = max(len(name) for name, _ in PHASES) if PHASES else 10
    for name, seconds in PHASES:
        write(f"  {name:<{width}}  {seconds:7.1f}s")


@pytest.fixture(scope="session")
def engine(request, tmp_path_factory):
    if os.geteuid() != 0 or not os.environ.get("DOCKER_HOST"):
        pytest.fail(
            "run through `make test-container` (as root): it starts the private "
            "Podman engine these tests drive"
        )
    # Each test module names its stand-in (STANDIN). A pytest-xdist worker
    # collects the whole session, so every worker sees the same order.
    standins = []
    for item in request.session.items:
        standin = getattr(item.module, "STANDIN", None)
        if standin and standin not in standins:
            standins.append(standin)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Each worker builds its own module's stand-in from the start; the
        # workers' temporary directories share a parent.
        plan_turns(standins, str(tmp_path_factory.getbasetemp().parent))
    else:
        # One after the other: all but the first module's stand-ins are
        # built in the background from the start.
        build_standins_ahead(standins[1:])
    yield os.environ["DOCKER_HOST"]
    stop_builds_ahead()

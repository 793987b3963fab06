"""The benchmark scripts' smoke tests run under the suite's own load."""

import pytest

from bench import machine


@pytest.fixture(autouse=True)
def _no_wait_for_an_idle_machine(request, monkeypatch):
    """A script waits up to 3 minutes for the load of earlier runs to settle
    before it measures; a smoke test measures nothing, so it does not wait
    (test_machine.py tests the wait itself)."""
    if request.module.__name__ != "tests.bench.test_machine":
        monkeypatch.setattr(machine, "SETTLE_PATIENCE_S", 0.0)

"""The benchmark scripts' tests run under the suite's own load."""

import pytest

from bench import machine


@pytest.fixture(autouse=True)
def _no_wait_for_an_idle_machine(monkeypatch):
    """A script waits up to 3 minutes for the load of earlier runs to settle
    before it measures; a test measures nothing, so it does not wait (the
    test of the wait itself gives it its patience back)."""
    monkeypatch.setattr(machine, "SETTLE_PATIENCE_S", 0.0)

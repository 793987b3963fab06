"""Fixtures of the formula tests: each route forced in turn."""

from __future__ import annotations

import pytest

from tfnorm.layers._ops import routes

FLOAT32_ROUTES = ["fused", "matvec", "reduce"]


@pytest.fixture(params=FLOAT32_ROUTES)
def route(request, monkeypatch):
    """Forces each route in turn: all stay covered whatever this machine
    would pick."""
    monkeypatch.setattr(routes, "ROUTE_OVERRIDE", request.param)
    return request.param

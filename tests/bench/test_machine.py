"""The idle check and run record shared by the benchmark scripts."""

from __future__ import annotations

import os

import pytest

from bench import machine


def _load(monkeypatch, value):
    monkeypatch.setattr(os, "getloadavg", lambda: (value, value, value))


def test_busy_machine_gets_a_loud_warning(monkeypatch, capsys):
    _load(monkeypatch, machine.idle_limit() + 0.5)
    assert machine.check_idle(require_idle=False) == machine.idle_limit() + 0.5
    out, err = capsys.readouterr()
    assert "WARNING: load average" in out
    assert "WARNING: load average" in err and "!!!!" in err


def test_busy_machine_is_refused_with_require_idle(monkeypatch, capsys):
    _load(monkeypatch, machine.idle_limit() + 0.5)
    with pytest.raises(SystemExit) as exit_info:
        machine.check_idle(require_idle=True)
    assert exit_info.value.code == 2
    assert "refusing to run" in capsys.readouterr().err


def test_idle_machine_runs_quietly(monkeypatch, capsys):
    _load(monkeypatch, machine.idle_limit() - 0.5)
    machine.check_idle(require_idle=True)
    assert capsys.readouterr() == ("", "")


def test_run_records_versions_clock_load_and_duration(monkeypatch):
    _load(monkeypatch, 0.25)
    run = machine.Run("wall", require_idle=True)
    _load(monkeypatch, 0.75)
    run.finish()
    info = run.describe()
    assert info["clock"] == "wall"
    assert (info["load_before"], info["load_after"]) == (0.25, 0.75)
    assert info["runtime_minutes"] >= 0
    for key in ("tensorflow", "keras", "python", "cpus", "date"):
        assert info[key]
    header = run.header()
    assert "load average 0.25 before, 0.75 after" in header
    assert info["tensorflow"] in header

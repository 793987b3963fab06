"""The idle check and run record shared by the benchmark scripts."""

from __future__ import annotations

import os
import time

import pytest

from bench import machine
from tfnorm._keras import tf

MEASURED_CORES = machine.OtherWork.cores  # before the fixture below replaces it


def _load(monkeypatch, value):
    monkeypatch.setattr(os, "getloadavg", lambda: (value, value, value))


@pytest.fixture(autouse=True)
def other_work(monkeypatch):
    """What other processes use, as `OtherWork` measures it; no real waits."""
    used = {"cores": 0.0}
    monkeypatch.setattr(machine.OtherWork, "cores", lambda self: used["cores"])
    monkeypatch.setattr(machine.time, "sleep", lambda seconds: None)
    return used


def test_busy_machine_gets_a_loud_warning(monkeypatch, capsys, other_work):
    _load(monkeypatch, machine.idle_limit() + 0.5)
    other_work["cores"] = machine.idle_limit() + 0.5
    assert machine.check_idle(require_idle=False) == machine.idle_limit() + 0.5
    out, err = capsys.readouterr()
    assert "WARNING: load average" in out
    assert "WARNING: load average" in err and "!!!!" in err


def test_busy_machine_is_refused_with_require_idle(monkeypatch, capsys, other_work):
    _load(monkeypatch, machine.idle_limit() + 0.5)
    other_work["cores"] = machine.idle_limit() + 0.5
    with pytest.raises(SystemExit) as exit_info:
        machine.check_idle(require_idle=True)
    assert exit_info.value.code == 2
    assert "refusing to run" in capsys.readouterr().err


def test_idle_machine_runs_quietly(monkeypatch, capsys):
    _load(monkeypatch, machine.idle_limit() - 0.5)
    machine.check_idle(require_idle=True)
    assert capsys.readouterr() == ("", "")


def test_the_load_of_an_earlier_run_is_waited_out(monkeypatch, capsys):
    # Just after another benchmark script: a high load, no other work.
    monkeypatch.setattr(machine, "SETTLE_PATIENCE_S", 180.0)
    loads = iter([machine.idle_limit() + 0.3, machine.idle_limit() + 0.1, 0.2])
    monkeypatch.setattr(os, "getloadavg", lambda: (next(loads),) * 3)
    assert machine.check_idle(require_idle=True) == 0.2
    assert "waiting for the load of earlier runs to settle" in capsys.readouterr().err


def test_a_run_that_only_loads_the_machine_itself_is_not_flagged(
    monkeypatch, capsys, other_work
):
    _load(monkeypatch, 0.25)
    run = machine.Run("wall", require_idle=True)
    _load(monkeypatch, machine.idle_limit() + 1.0)  # the run's own work
    run.finish()
    assert "WARNING" not in capsys.readouterr().out
    other_work["cores"] = machine.idle_limit() + 0.2
    run.finish()
    assert "WARNING: other work kept" in capsys.readouterr().out


def test_other_work_leaves_out_this_process():
    if machine._busy_cpu_seconds() is None:
        pytest.skip("/proc/stat is Linux's")
    busy_before = machine._busy_cpu_seconds()
    own_before = time.process_time()
    probe = machine.OtherWork()
    started = time.perf_counter()
    while time.process_time() - own_before < 0.4:
        pass  # this process's own work: 0.4 CPU seconds, however busy the rest
    elapsed = time.perf_counter() - started
    all_processes = (machine._busy_cpu_seconds() - busy_before) / elapsed
    own = (time.process_time() - own_before) / elapsed
    # What the probe reports is everything less this process's share; other
    # processes' work (the suite's other worker, say) may be anything. /proc
    # counts in clock ticks (10 ms), hence the slack.
    assert MEASURED_CORES(probe) == pytest.approx(all_processes - own, abs=0.15)
    assert own > 0.2


def test_run_records_versions_clock_load_and_duration(monkeypatch, other_work):
    _load(monkeypatch, 0.25)
    run = machine.Run("wall", require_idle=True)
    _load(monkeypatch, 0.75)
    other_work["cores"] = 0.05
    run.finish()
    info = run.describe()
    assert info["clock"] == "wall"
    assert (info["load_before"], info["load_after"]) == (0.25, 0.75)
    assert info["other_work_cores"] == 0.05
    assert info["runtime_minutes"] >= 0
    for key in ("tensorflow", "keras", "python", "cpus", "date"):
        assert info[key]
    header = run.header()
    assert "load average 0.25 before, 0.75 after" in header
    assert "other processes used 0.05 cores" in header
    assert info["tensorflow"] in header


def test_runs_measure_on_the_first_gpu_tensorflow_sees(monkeypatch):
    gpu = tf.config.LogicalDevice(name="/device:GPU:0", device_type="GPU")
    monkeypatch.setattr(tf.config, "list_logical_devices", lambda kind=None: [gpu])
    assert machine.bench_device() == "/device:GPU:0"


def test_without_a_gpu_runs_measure_on_the_cpu_and_say_so():
    device = machine.bench_device()
    assert device == "/device:CPU:0"  # the test machines have no GPU
    label, route = machine.describe_device(device)
    assert label == f"CPU:0 ({os.cpu_count()} cores)"
    assert route == "fused"
    header = machine.Run("wall", require_idle=False).header()
    assert (
        f'measured on CPU:0 ({os.cpu_count()} cores), tfnorm float32 route "fused"'
        in header
    )

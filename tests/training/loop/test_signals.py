"""`tfnorm.training.loop.signals`: SIGTERM and SIGINT end the run after a step."""

from __future__ import annotations

import os
import signal

from tests.training.fakes import Log
from tfnorm.training.loop import signals
from tfnorm.training.loop.driver import run_loop


def test_a_signal_stops_after_the_step_and_asks_for_a_save():
    flag, log = signals.StopFlag(), Log()
    stopper = signals.SignalStop(flag, log, lambda: "ckpt-3")
    steps = []

    def step_fn(step):
        steps.append(step)
        if step == 3:
            flag.signal_name = "SIGTERM"
        return {"loss": 0.1, "correct": 1.0}

    result = run_loop(step_fn, 0, 12, [stopper])
    assert (result.status, result.step, steps) == ("terminated", 3, [1, 2, 3])
    assert result.stop.save
    assert "SIGTERM received: checkpoint saved at step 3 (ckpt-3)" in log.text


def test_stop_flag_handles_signals_only_inside_the_block():
    before = signal.getsignal(signal.SIGTERM)
    flag = signals.StopFlag()
    with flag.installed(True):
        os.kill(os.getpid(), signal.SIGTERM)
        assert flag.signal_name == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before


def test_sighup_stops_like_sigterm_with_status_hangup():
    flag, log = signals.StopFlag(), Log()
    stopper = signals.SignalStop(flag, log, lambda: "ckpt-2")
    # As in a terminal; the suite itself may run under nohup (SIGHUP ignored).
    previous = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        with flag.installed(True):
            os.kill(os.getpid(), signal.SIGHUP)
            assert flag.signal_name == "SIGHUP"
            result = run_loop(
                lambda step: {"loss": 0.1, "correct": 1.0}, 0, 5, [stopper]
            )
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert (result.status, result.step, result.stop.save) == ("hangup", 1, True)
    assert "SIGHUP received: checkpoint saved at step 1 (ckpt-2)" in log.text


def test_an_ignored_sighup_stays_ignored_under_nohup():
    # `nohup tfnorm train ...` asks for the run to outlive the terminal.
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        flag = signals.StopFlag()
        with flag.installed(True):
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
        assert flag.signal_name is None
    finally:
        signal.signal(signal.SIGHUP, previous)

"""`tfnorm.training.signals`: SIGTERM and SIGINT end the run after a step."""

from __future__ import annotations

import os
import signal

from tests.training.fakes import Log
from tfnorm.training import signals
from tfnorm.training.loop import run_loop


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

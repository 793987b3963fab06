"""`tfnorm.training.loop.driver`: the step loop and the order it calls actions in."""

from __future__ import annotations

import pytest

from tfnorm.training.loop.driver import Action, Stop, StopRun, run_loop


class Recorder(Action):
    """Records every call; returns `stops[step]` from `on_step_end`."""

    def __init__(self, name, calls, stops=None, replace=None, end_error=None):
        self.name, self.calls = name, calls
        self.stops = stops or {}
        self.replace = replace
        self.end_error = end_error

    def on_start(self, step):
        self.calls.append((self.name, "start", step))

    def on_step_end(self, step, logs):
        self.calls.append((self.name, "step", step, logs["x"]))
        stop = self.stops.get(step)
        if isinstance(stop, StopRun):
            raise stop
        return stop

    def on_stop(self, step, stop):
        self.calls.append((self.name, "stop", step, stop.status))
        return self.replace

    def on_end(self, result):
        self.calls.append((self.name, "end", result.status, result.step))
        if self.end_error:
            raise self.end_error


def square(step):
    return {"x": step * step}


def test_runs_each_step_once_and_calls_actions_in_order():
    calls = []
    actions = [Recorder("a", calls), Recorder("b", calls)]
    result = run_loop(square, 2, 4, actions)
    assert (result.status, result.step, result.start_step) == ("completed", 4, 2)
    assert calls == [
        ("a", "start", 2),
        ("b", "start", 2),
        ("a", "step", 3, 9),
        ("b", "step", 3, 9),
        ("a", "step", 4, 16),
        ("b", "step", 4, 16),
        ("a", "end", "completed", 4),
        ("b", "end", "completed", 4),
    ]


def test_a_resumed_run_already_at_the_end_runs_no_step():
    calls = []
    result = run_loop(square, 5, 5, [Recorder("a", calls)])
    assert result.step == 5 and [c[1] for c in calls] == ["start", "end"]


def test_a_stop_skips_the_later_actions_and_asks_every_action():
    calls = []
    stop = Stop("terminated", "SIGTERM received", save=True)
    actions = [Recorder("a", calls, stops={2: stop}), Recorder("b", calls)]
    result = run_loop(square, 0, 10, actions)
    assert (result.status, result.step, result.stop) == ("terminated", 2, stop)
    assert ("b", "step", 2, 4) not in calls
    assert ("a", "stop", 2, "terminated") in calls
    assert ("b", "stop", 2, "terminated") in calls


def test_an_uncounted_stop_leaves_the_step_undone():
    stop = Stop("nan", "loss is nan", counted=False)
    result = run_loop(square, 0, 10, [Recorder("a", [], stops={3: stop})])
    assert (result.status, result.step) == ("nan", 2)


def test_on_stop_may_replace_the_stop_for_the_later_actions():
    calls = []
    replacement = Stop("nan", "weights", save=False)
    actions = [
        Recorder("guard", calls, stops={1: Stop("terminated", save=True)}),
        Recorder("veto", calls, replace=replacement),
        Recorder("saver", calls),
    ]
    result = run_loop(square, 0, 3, actions)
    assert result.stop is replacement and result.status == "nan"
    assert ("saver", "stop", 1, "nan") in calls


def test_stop_run_ends_at_once_and_still_ends_every_action():
    calls = []
    failure = StopRun(Stop("failed", "disk full"))
    actions = [Recorder("a", calls, stops={2: failure}), Recorder("b", calls)]
    result = run_loop(square, 0, 10, actions)
    assert (result.status, result.stop.reason) == ("failed", "disk full")
    # Step 2 was done before the action failed on it.
    assert ("b", "end", "failed", 2) in calls
    assert not [c for c in calls if c[1] == "stop"]


def test_an_error_in_a_step_ends_every_action_then_propagates():
    calls = []

    def broken(step):
        if step == 3:
            raise MemoryError("out of memory")
        return square(step)

    with pytest.raises(MemoryError):
        run_loop(broken, 0, 10, [Recorder("a", calls)])
    assert calls[-1] == ("a", "end", "failed", 2)


def test_every_on_end_runs_even_when_one_fails():
    calls = []
    actions = [
        Recorder("a", calls, end_error=OSError("no space")),
        Recorder("b", calls),
    ]
    with pytest.raises(OSError, match="no space"):
        run_loop(square, 0, 1, actions)
    assert ("b", "end", "completed", 1) in calls

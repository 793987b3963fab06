"""A training loop that only runs steps; everything else is an `Action`.

`run_loop` calls a step function once per step and hands each step's logs to
a list of actions in order. Checkpointing, progress output, evaluation,
histograms, NaN guards and signal handling are actions, so each is written,
read and tested on its own, and another experiment can reuse the loop with
its own step function and a different selection of actions.

An action stops the run by returning (or raising) a `Stop`. Before the loop
returns, every action's `on_stop` may veto or replace a stop that asks for a
final save (the NaN guard turns a signal stop into a "nan" stop when the
weights are no longer finite; the checkpointer then declines to save).
"""

from __future__ import annotations

import dataclasses
import types


@dataclasses.dataclass
class Stop:
    """A request to end the run after the current step.

    Attributes:
        status: the run's status from now on (e.g. "terminated", "nan").
        reason: one human-readable line, or None.
        save: True when the state reached so far should be checkpointed
            before the run ends.
        counted: False when the current step must not count as done (its
            result was rejected, as for a non-finite loss).
    """

    status: str
    reason: str | None = None
    save: bool = False
    counted: bool = True


class StopRun(Exception):
    """Raised by an action (or the step function) to end the run at once.

    For failures inside an action, such as a checkpoint that cannot be
    written, where returning a `Stop` would let the later actions run first.
    """

    def __init__(self, stop):
        super().__init__(stop.reason or stop.status)
        self.stop = stop


@dataclasses.dataclass
class LoopResult:
    """How the loop ended: the status, the last completed step and the stop."""

    status: str
    step: int
    start_step: int
    stop: Stop | None = None


class Action:
    """One concern of the run, called by `run_loop` around the steps.

    Subclasses override what they need. `on_step_end` and `on_stop` return
    None to let the run go on unchanged, or a `Stop`. `metrics` are what the
    action measured, for the run's summary (read-only and empty here).
    """

    metrics = types.MappingProxyType({})

    def on_start(self, step):
        """Called once before the first step; `step` is the step resumed from."""

    def on_step_end(self, step, logs):
        """Called after step number `step` (counting from 1) with its logs."""

    def on_stop(self, step, stop):
        """Called on every action when a run stops early; may replace `stop`."""

    def on_end(self, result):
        """Called once with the `LoopResult`, however the run ended."""


def run_loop(step_fn, start_step, total_steps, actions, status="completed"):
    """Runs `step_fn()` until `total_steps` or until an action asks to stop.

    Args:
        step_fn: called with the step number about to run (from
            `start_step + 1`); returns that step's logs (a dict).
        start_step: steps already done (0, or the step a run resumed from).
        total_steps: the step count at which the run is complete.
        actions: `Action`s, called in this order after each step.
        status: the status of a run that reaches `total_steps`.

    Returns:
        A `LoopResult`. Each action's `on_end` has run, even when an
        exception other than `StopRun` escapes (it is re-raised afterwards
        with the status "failed").
    """
    result = LoopResult(status, start_step, start_step)
    step = start_step
    try:
        for action in actions:
            action.on_start(start_step)
        while step < total_steps:
            step += 1
            stop = _run_step(step_fn, step, actions)
            if stop is not None and not stop.counted:
                step -= 1
            result.step = step
            if stop is not None:
                _finish_early(result, step, stop, actions)
                break
    except StopRun as error:
        # The step ran; an action (such as a failed save) ended the run on it.
        result.step, result.stop, result.status = step, error.stop, error.stop.status
    except BaseException as error:
        result.status = "failed"
        result.stop = Stop("failed", f"{type(error).__name__}: {error}")
        _end(actions, result, raise_errors=False)
        raise
    _end(actions, result)
    return result


def _run_step(step_fn, step, actions):
    logs = step_fn(step)
    for action in actions:
        stop = action.on_step_end(step, logs)
        if stop is not None:
            return stop
    return None


def _finish_early(result, step, stop, actions):
    for action in actions:
        stop = action.on_stop(step, stop) or stop
    result.stop, result.status = stop, stop.status


def _end(actions, result, raise_errors=True):
    errors = []
    for action in actions:
        try:
            action.on_end(result)
        except Exception as error:  # one action's cleanup must not skip the rest
            errors.append(error)
    if errors and raise_errors:
        raise errors[0]

"""SIGTERM, SIGINT and SIGHUP end a run cleanly: after the current step, with a checkpoint."""

from __future__ import annotations

import contextlib
import signal
import threading

from tfnorm.training.loop.driver import Action, Stop


class SignalStop(Action):
    """Ends the run after the current step once SIGTERM, SIGINT or SIGHUP arrived.

    The stop asks for a checkpoint, so rerunning the same command resumes.
    """

    STATUS = {"SIGTERM": "terminated", "SIGINT": "interrupted", "SIGHUP": "hangup"}

    def __init__(self, flag, log, last_checkpoint):
        self.flag = flag
        self.log = log
        self.last_checkpoint = last_checkpoint

    def on_step_end(self, step, logs):
        name = self.flag.signal_name
        if name:
            return Stop(self.STATUS[name], f"{name} received", save=True)
        return None

    def on_end(self, result):
        if result.status in self.STATUS.values():
            self.log.line(
                f"{self.flag.signal_name} received: checkpoint saved at step "
                f"{result.step} ({self.last_checkpoint()}); rerun the same "
                "command to resume"
            )


class StopFlag:
    """Records a SIGTERM/SIGINT/SIGHUP so that the loop can stop between steps.

    SIGHUP (the terminal closed, an SSH session ended) is handled like
    SIGTERM, unless it was ignored when the block began: under `nohup` the
    user asked for the run to outlive the terminal, so it stays ignored.
    """

    def __init__(self):
        self.signal_name = None

    def _handle(self, signum, _frame):
        self.signal_name = signal.Signals(signum).name

    @contextlib.contextmanager
    def installed(self, enabled):
        """Handles the signals inside the block (main thread only)."""
        if not enabled or threading.current_thread() is not threading.main_thread():
            yield self
            return
        handled = [signal.SIGTERM, signal.SIGINT]
        if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
            handled.append(signal.SIGHUP)
        previous = {signum: signal.signal(signum, self._handle) for signum in handled}
        try:
            yield self
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

"""Watching the services, forwarding `docker stop`, and stopping everything.

`SIGTERM`/`SIGINT` (what `docker stop` sends through tini) are passed to every
process of the workload user (JupyterLab, its kernels, sshd, sessions and
background runs started over SSH); what is still alive after the stop
timeout is killed. If a service exits on its own, the others are stopped and
the entrypoint exits non-zero, so the container's restart policy applies.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

from tfnorm_entrypoint.log import log

POLL_SECONDS = 0.2


def supervise(services, stop_timeout):
    """Starts `services` ((name, start) pairs; `start()` returns a process or
    None when the service is off) and watches them; returns the exit code."""
    stop_requested = []

    def request_stop(signum, _frame):
        stop_requested.append(signum)

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    running = {}
    try:
        for name, start in services:
            process = start()
            if process is not None:
                running[name] = process
        while not stop_requested:
            for name, process in running.items():
                if process.poll() is not None:
                    log(
                        f"{name} exited with code {process.returncode}; "
                        "stopping the container"
                    )
                    stop_everything(list(running.values()), stop_timeout)
                    return process.returncode or 1
            time.sleep(POLL_SECONDS)
    except BaseException:
        # A failed start must not leave sshd or JupyterLab running unsupervised
        # (when none has started, the error is the one line to show).
        if running:
            stop_everything(list(running.values()), stop_timeout)
        raise
    log(f"received signal {stop_requested[0]}; stopping")
    clean = stop_everything(list(running.values()), stop_timeout)
    return 0 if clean else 1


def stop_everything(children, timeout):
    """SIGTERM to every workload process; SIGKILL what outlives `timeout`.

    Returns whether everything ended within `timeout`.
    """
    targets = set(workload_processes()) | {c.pid for c in children if c.poll() is None}
    log(f"stopping {len(targets)} process(es) (up to {timeout:g}s)")
    _signal_all(targets, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in children:
            child.poll()  # reaps our own children so they stop counting as alive
        if not any(_alive(pid) for pid in targets):
            return True
        time.sleep(POLL_SECONDS)
    left = [pid for pid in targets if _alive(pid)]
    log(f"killing {len(left)} process(es) still alive after {timeout:g}s: {left}")
    _signal_all(left, signal.SIGKILL)
    for child in children:
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    return False


def _signal_all(pids, signum):
    for pid in pids:
        try:
            os.kill(pid, signum)
        except OSError:
            pass


def workload_processes():
    """PIDs of this user's processes, except this one and its ancestors.

    In the container these are JupyterLab, kernels, sshd, SSH sessions and
    runs started with nohup: `docker stop` must reach all of them.
    """
    uid = os.getuid()
    excluded = {1}
    pid = os.getpid()
    while pid > 1:
        excluded.add(pid)
        try:
            pid = int(_proc_stat(pid)[1])
        except (OSError, IndexError, ValueError):
            break
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in excluded:
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid == uid and _alive(entry):
                found.append(int(entry))
        except OSError:
            continue
    return found


def _alive(pid):
    try:
        state = _proc_stat(pid)[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _proc_stat(pid):
    """The fields of /proc/<pid>/stat after the command name: state, ppid, ..."""
    with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
        return handle.read().rsplit(")", 1)[1].split()

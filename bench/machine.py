"""What a benchmark run states about itself, and the idle check it makes.

Ratios between variants interleaved in one process survive some load, but a
single fused kernel that uses every core (Keras 2.9's LayerNormalization) and
a chain of lighter ops do not slow down alike when other work shares the CPU:
figures are only comparable between runs on an idle machine. Every script
here checks the load average before it starts and records it, with the
versions, clock and duration, next to its tables.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
import time

from tfnorm._keras import FLAVOUR, KERAS_VERSION, tf


def idle_limit():
    """The 1-minute load average above which the machine counts as busy:
    half its cores."""
    return (os.cpu_count() or 1) / 2


def check_idle(require_idle):
    """Warns loudly (or, with `require_idle`, exits with status 2) when the
    1-minute load average is above `idle_limit()`. Returns the load."""
    load = os.getloadavg()[0]
    if load > idle_limit():
        message = (
            f"load average {load:.2f} is above {idle_limit():.1f} (half of "
            f"{os.cpu_count()} cores): other work shares this machine, so "
            "ratios measured now are distorted (fused multi-threaded kernels "
            "suffer most). Do not record them; rerun on an idle machine."
        )
        if require_idle:
            print(f"bench: refusing to run: {message}", file=sys.stderr)
            sys.exit(2)
        banner = "!" * 78
        print(f"{banner}\nWARNING: {message}\n{banner}", file=sys.stderr, flush=True)
        print(f"WARNING: {message}", flush=True)
    return load


class Run:
    """The state of one benchmark run: call `finish()` at its end."""

    def __init__(self, clock_name, require_idle):
        self.clock = clock_name
        self.load_before = check_idle(require_idle)
        self.started = time.perf_counter()
        self.date = datetime.datetime.now(datetime.timezone.utc)
        self.load_after = None
        self.minutes = None

    def finish(self):
        self.load_after = os.getloadavg()[0]
        self.minutes = (time.perf_counter() - self.started) / 60
        if self.load_after > idle_limit():
            print(
                f"WARNING: load average {self.load_after:.2f} at the end of the "
                f"run (above {idle_limit():.1f}): the figures may be distorted.",
                flush=True,
            )

    def describe(self):
        info = {
            "tensorflow": tf.__version__,
            "keras": f"{KERAS_VERSION} ({FLAVOUR})",
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "clock": self.clock,
            "date": self.date.strftime("%Y-%m-%d %H:%M UTC"),
            "load_before": round(self.load_before, 2),
        }
        if self.minutes is not None:
            info["load_after"] = round(self.load_after, 2)
            info["runtime_minutes"] = round(self.minutes, 1)
        return info

    def header(self):
        info = self.describe()
        text = (
            f"TensorFlow {info['tensorflow']}, Keras {info['keras']}, Python "
            f"{info['python']}, {info['cpus']} CPUs, {info['clock']} clock; "
            f"{info['date']}; load average {info['load_before']:.2f} before"
        )
        if "load_after" in info:
            text += (
                f", {info['load_after']:.2f} after; run took "
                f"{info['runtime_minutes']:.1f} min"
            )
        return text

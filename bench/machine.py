"""What a benchmark run states about itself, and the idle check it makes.

Ratios between variants interleaved in one process survive some load, but a
single fused kernel that uses every core (Keras 2.9's LayerNormalization) and
a chain of lighter ops do not slow down alike when other work shares the CPU:
figures are only comparable between runs on an idle machine. Every script
here checks the load average before it starts and records it, with the
versions, clock and duration, next to its tables.

The load average also counts the benchmarks' own work: right after one
script of `make bench` it is high on a 2-core machine with nothing else
running. So a high load is first checked against what other processes use
now (/proc/stat less this process); when that is low, the script waits for
the load average to settle. At the end, the CPU other processes used during
the run is what is checked, since the load then is mostly the run's own.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
import time

from tfnorm._keras import FLAVOUR, KERAS_VERSION, tf
from tfnorm.layers._ops import routes


def idle_limit():
    """The 1-minute load average above which the machine counts as busy:
    half its cores."""
    return (os.cpu_count() or 1) / 2


def _busy_cpu_seconds():
    """CPU seconds all processes have spent busy since boot, or None where
    /proc/stat is missing."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = [int(value) for value in handle.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds():
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


class OtherWork:
    """The cores other processes keep busy between `__init__` and `cores()`."""

    def __init__(self):
        self.busy = _busy_cpu_seconds()
        self.own = _own_cpu_seconds()
        self.started = time.perf_counter()

    def cores(self):
        busy = _busy_cpu_seconds()
        if busy is None or self.busy is None:
            return None
        elapsed = time.perf_counter() - self.started
        others = (busy - self.busy) - (_own_cpu_seconds() - self.own)
        return max(0.0, others / elapsed)


#: How long a script waits for the load of earlier runs to settle, seconds.
SETTLE_PATIENCE_S = 180.0


def _settle(limit, window=2.0):
    """The load average once it is at most `limit`, waiting up to
    `SETTLE_PATIENCE_S` while other processes keep less than `limit` cores
    busy; the first load seen above `limit` otherwise."""
    load = os.getloadavg()[0]
    deadline = time.perf_counter() + SETTLE_PATIENCE_S
    while load > limit and time.perf_counter() < deadline:
        probe = OtherWork()
        time.sleep(window)
        others = probe.cores()
        if others is None or others > limit:
            break
        print(
            f"bench: load average {load:.2f}, other work {others:.2f} cores: "
            "waiting for the load of earlier runs to settle",
            file=sys.stderr,
            flush=True,
        )
        time.sleep(10)
        load = os.getloadavg()[0]
    return load


def check_idle(require_idle):
    """Warns loudly (or, with `require_idle`, exits with status 2) when the
    1-minute load average is above `idle_limit()` after `_settle`. Returns
    the load."""
    load = _settle(idle_limit())
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


def add_report_arguments(parser, raw="every figure"):
    """The flags every timing script of `bench/` takes: `--require-idle`,
    `--markdown FILE` and `--json FILE` (`raw`: what the JSON holds)."""
    parser.add_argument(
        "--require-idle",
        action="store_true",
        help="exit with status 2 instead of warning when the machine is busy",
    )
    parser.add_argument("--markdown", help="also write the tables to this file")
    parser.add_argument("--json", help=f"also write {raw} to this file")


def bench_device():
    """The device a run measures on: the first GPU TensorFlow sees, else the
    CPU. Every script runs its work under `tf.device(run.device)`."""
    gpus = tf.config.list_logical_devices("GPU")
    return gpus[0].name if gpus else "/device:CPU:0"


def short_device_name(device):
    """ "CPU:0" for "/device:CPU:0": the form TensorFlow's memory statistics
    take."""
    spec = tf.DeviceSpec.from_string(device)
    return f"{spec.device_type}:{spec.device_index or 0}"


def describe_device(device):
    """(label, route): "CPU:0 (2 cores)" or "GPU:0 (<its name>)", and the
    route tfnorm's float32 norms take there (see `tfnorm/layers/_ops/routes.py`)."""
    spec = tf.DeviceSpec.from_string(device)
    label = short_device_name(device)
    if spec.device_type == "GPU":
        physical = tf.config.list_physical_devices("GPU")[spec.device_index or 0]
        details = tf.config.experimental.get_device_details(physical)
        label += f" ({details.get('device_name', 'unnamed GPU')})"
    else:
        label += f" ({os.cpu_count()} cores)"
    with tf.device(device):
        probe = tf.zeros([2, 4])
    return label, routes.route(probe, [1], 2)


class Run:
    """The state of one benchmark run: call `finish()` at its end."""

    def __init__(self, clock_name, require_idle):
        self.clock = clock_name
        self.device = bench_device()
        self.device_label, self.route = describe_device(self.device)
        self.load_before = check_idle(require_idle)
        self.started = time.perf_counter()
        self.other_work = OtherWork()
        self.date = datetime.datetime.now(datetime.timezone.utc)
        self.load_after = None
        self.other_cores = None
        self.minutes = None

    def finish(self):
        self.load_after = os.getloadavg()[0]
        self.other_cores = self.other_work.cores()
        self.minutes = (time.perf_counter() - self.started) / 60
        # The load now is mostly this run's own; other processes' CPU is
        # what tells whether something shared the machine.
        busy = self.other_cores if self.other_cores is not None else self.load_after
        if busy > idle_limit():
            print(
                f"WARNING: other work kept {busy:.2f} cores busy during the run "
                f"(above {idle_limit():.1f}): the figures may be distorted.",
                flush=True,
            )

    def describe(self):
        info = {
            "tensorflow": tf.__version__,
            "keras": f"{KERAS_VERSION} ({FLAVOUR})",
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "device": self.device_label,
            "tfnorm_route": self.route,
            "clock": self.clock,
            "date": self.date.strftime("%Y-%m-%d %H:%M UTC"),
            "load_before": round(self.load_before, 2),
        }
        if self.minutes is not None:
            info["load_after"] = round(self.load_after, 2)
            if self.other_cores is not None:
                info["other_work_cores"] = round(self.other_cores, 2)
            info["runtime_minutes"] = round(self.minutes, 1)
        return info

    def report(self, method, tables, markdown=None, json_path=None, **results):
        """Prints the run's header, `method` and `tables`; writes the same to
        `markdown` and, with `results` (the raw figures), to `json_path`."""
        import json

        text = f"{self.header()}\n{method}\n\n{tables}"
        print(f"\n{text}")
        if markdown:
            with open(markdown, "w") as handle:
                handle.write(f"{text}\n")
        if json_path:
            with open(json_path, "w") as handle:
                json.dump(
                    {"run": self.describe(), "method": method, **results},
                    handle,
                    indent=1,
                )

    def header(self):
        info = self.describe()
        text = (
            f"TensorFlow {info['tensorflow']}, Keras {info['keras']}, Python "
            f"{info['python']}, {info['cpus']} CPUs, {info['clock']} clock; "
            f"measured on {info['device']}, tfnorm float32 route "
            f'"{info["tfnorm_route"]}"; '
            f"{info['date']}; load average {info['load_before']:.2f} before"
        )
        if "load_after" in info:
            text += (
                f", {info['load_after']:.2f} after; run took "
                f"{info['runtime_minutes']:.1f} min"
            )
        if "other_work_cores" in info:
            text += f"; other processes used {info['other_work_cores']:.2f} cores"
        return text

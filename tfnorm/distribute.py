"""Choosing a `tf.distribute` strategy from the machine and `TF_CONFIG`.

`get_strategy("auto")` picks, in order:

1. `MultiWorkerMirroredStrategy` when `TF_CONFIG` names more than one worker
   (the "chief" and "worker" jobs together) — the cluster launcher (Kubeflow,
   a SLURM script, or you) writes one `TF_CONFIG` per process;
2. `MirroredStrategy` over all GPUs when there are two or more;
3. `OneDeviceStrategy` on the GPU when there is exactly one;
4. otherwise the default (no-op) strategy.

`TF_CONFIG` is a JSON object such as::

    {"cluster": {"worker": ["10.0.0.1:12345", "10.0.0.2:12345"]},
     "task": {"type": "worker", "index": 0}}

Worker 0 (or the "chief" task, when the cluster has one) is the chief: it
writes checkpoints, summaries and the exported model.
"""

from __future__ import annotations

import json
import os

from tfnorm._checks import is_int
from tfnorm._keras import tf
from tfnorm.choices import STRATEGIES

KINDS = STRATEGIES
# Jobs whose tasks take part in MultiWorkerMirroredStrategy's all-reduce.
_TRAINING_JOBS = ("chief", "worker")


def parse_tf_config(text):
    """Parses and validates a `TF_CONFIG` string.

    Args:
        text: the JSON text of `TF_CONFIG`. Empty or None means no cluster.

    Returns:
        The parsed dict, or None for an empty `text`.

    Raises:
        ValueError: naming what is wrong: invalid JSON, no `cluster` object,
            a job that is not a list of "host:port" strings, a bad port, a
            missing `task`, a task type not in the cluster or an index out of
            range.
    """
    if text is None or not str(text).strip():
        return None
    try:
        config = json.loads(text)
    except ValueError as error:
        raise ValueError(
            f"TF_CONFIG is not valid JSON ({error}). Received: {text!r}"
        ) from None
    if not isinstance(config, dict):
        raise ValueError(f"TF_CONFIG must be a JSON object. Received: {text!r}")
    cluster = config.get("cluster")
    if not isinstance(cluster, dict) or not cluster:
        raise ValueError(
            "TF_CONFIG needs a non-empty 'cluster' object mapping job names to "
            f"lists of 'host:port'. Received: cluster={cluster!r}"
        )
    for job, addresses in cluster.items():
        if not isinstance(addresses, list) or not addresses:
            raise ValueError(
                f"TF_CONFIG cluster job {job!r} must be a non-empty list of "
                f"'host:port' strings. Received: {addresses!r}"
            )
        for address in addresses:
            _check_address(job, address)
    task = config.get("task")
    if not isinstance(task, dict):
        raise ValueError(
            "TF_CONFIG needs a 'task' object with 'type' and 'index'. "
            f"Received: task={task!r}"
        )
    task_type = task.get("type")
    if task_type not in cluster:
        raise ValueError(
            f"TF_CONFIG task type must be one of the cluster's jobs "
            f"{sorted(cluster)}. Received: type={task_type!r}"
        )
    index = task.get("index", 0)
    if not is_int(index):
        raise ValueError(
            f"TF_CONFIG task index must be an integer. Received: index={index!r}"
        )
    if not 0 <= index < len(cluster[task_type]):
        raise ValueError(
            f"TF_CONFIG task index is out of range for job {task_type!r}, which "
            f"has {len(cluster[task_type])} task(s). Received: index={index}"
        )
    return config


def _check_address(job, address):
    host, sep, port = (
        str(address).rpartition(":") if isinstance(address, str) else ("", "", "")
    )
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"TF_CONFIG cluster job {job!r} has an address that is not "
            f"'host:port' with a port in 1..65535. Received: {address!r}"
        )


def num_workers(tf_config) -> int:
    """Number of processes that train together under `tf_config` (chief + workers)."""
    if not tf_config:
        return 1
    return sum(len(tf_config["cluster"].get(job, ())) for job in _TRAINING_JOBS)


def is_chief(tf_config="env") -> bool:
    """True for the process that should write checkpoints and exports.

    That is the "chief" task, or worker 0 when the cluster has no chief, or the
    only process when there is no `TF_CONFIG`. `tf_config` defaults to the
    parsed `TF_CONFIG` environment variable.
    """
    if tf_config == "env":
        tf_config = parse_tf_config(os.environ.get("TF_CONFIG"))
    if not tf_config:
        return True
    task = tf_config["task"]
    if "chief" in tf_config["cluster"]:
        return task["type"] == "chief"
    return task["type"] == "worker" and task.get("index", 0) == 0


def choose(kind="auto", tf_config="env", num_gpus=None):
    """The strategy kind `get_strategy(kind)` would build, and why.

    Args:
        kind: one of `KINDS`.
        tf_config: parsed `TF_CONFIG` (dict or None); defaults to the
            environment's.
        num_gpus: number of visible GPUs; defaults to TensorFlow's count.

    Returns:
        `(kind, reason)`, kind being one of "default", "one_device",
        "mirrored", "multi_worker".
    """
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {KINDS}. Received: kind={kind!r}")
    if tf_config == "env":
        tf_config = parse_tf_config(os.environ.get("TF_CONFIG"))
    if num_gpus is None:
        num_gpus = len(tf.config.list_physical_devices("GPU"))
    workers = num_workers(tf_config)
    if kind != "auto":
        return kind, "requested"
    if workers > 1:
        return "multi_worker", f"TF_CONFIG names {workers} workers"
    if num_gpus >= 2:
        return "mirrored", f"{num_gpus} GPUs"
    if num_gpus == 1:
        return "one_device", "1 GPU"
    return "default", "no GPU and no multi-worker TF_CONFIG"


def get_strategy(kind="auto", devices=None):
    """Returns the `tf.distribute.Strategy` for `kind` (see the module docstring).

    Create it before building the model and build the model inside
    `strategy.scope()`. A malformed `TF_CONFIG` raises ValueError here, before
    TensorFlow would fail less clearly.

    Example:

    >>> from tfnorm import distribute
    >>> strategy = distribute.get_strategy("default")
    >>> strategy.num_replicas_in_sync
    1

    Args:
        kind: "auto", "default", "one_device", "mirrored" or "multi_worker".
            Defaults to "auto".
        devices: optional device list for "mirrored" (e.g.
            `["/cpu:0", "/cpu:1"]`) or a single device for "one_device";
            defaults to all GPUs / the first GPU (or the CPU without GPUs).
    """
    resolved, _ = choose(kind)
    if devices is not None:
        check_devices(devices)
    if resolved == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if resolved == "mirrored":
        return tf.distribute.MirroredStrategy(
            devices, cross_device_ops=_cpu_reduction(devices)
        )
    if resolved == "one_device":
        if devices is None:
            devices = "/gpu:0" if tf.config.list_physical_devices("GPU") else "/cpu:0"
        elif isinstance(devices, (list, tuple)):
            if len(devices) != 1:
                raise ValueError(
                    f'kind="one_device" takes one device. Received: devices={devices!r}'
                )
            devices = devices[0]
        return tf.distribute.OneDeviceStrategy(devices)
    return tf.distribute.get_strategy()


class DeviceError(ValueError):
    """A device named for a strategy does not exist or is not a device name."""


def _cpu_reduction(devices):
    """How replicas on CPUs only add their gradients (None: TensorFlow's
    choice, NCCL on GPUs).

    TensorFlow's default collective all-reduce keys each collective by an
    instance number that a second MirroredStrategy over the same CPUs reuses:
    a second run in the same process (a notebook) with another model aborts
    with "Shape mismatch in the collective instance". Adding through one
    device has no such state.
    """
    if devices and all("CPU" in str(device).upper() for device in devices):
        return tf.distribute.ReductionToOneDevice()
    return None


def check_devices(devices):
    """Raises `DeviceError` unless every local device in `devices` exists.

    TensorFlow does not check: a MirroredStrategy over `/cpu:9` waits forever
    in its first step, and a OneDeviceStrategy on `/gpu:7` of a CPU-only
    machine places the ops on the CPU. Names of a remote job (`/job:...`)
    are left to the cluster.
    """
    names = [devices] if isinstance(devices, str) else list(devices)
    local = {}
    for device in tf.config.list_logical_devices():
        spec = tf.DeviceSpec.from_string(device.name)
        local[(spec.device_type.upper(), spec.device_index)] = device.name
    for name in names:
        try:
            spec = tf.DeviceSpec.from_string(name)
        except (ValueError, TypeError):
            spec = None
        if spec is None or spec.device_type is None:
            raise DeviceError(
                f"{name!r} is not a device name such as /gpu:0 or /cpu:1. "
                f"Received: devices={devices!r}"
            )
        if spec.job not in (None, "localhost"):
            continue
        if (spec.device_type.upper(), spec.device_index or 0) not in local:
            have = ", ".join(
                f"/{kind.lower()}:{index}" for kind, index in sorted(local)
            )
            raise DeviceError(
                f"this machine has no device {name} (it has {have}). "
                f"Received: devices={devices!r}"
            )


def describe_choice(kind="auto") -> str:
    """One line for `tfnorm info`, e.g. "mirrored (2 GPUs)"."""
    resolved, reason = choose(kind)
    return f"{resolved} ({reason})"

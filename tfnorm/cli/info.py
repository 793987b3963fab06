"""`tfnorm info`: versions (tfnorm's first), devices and the strategy tfnorm would choose."""

from __future__ import annotations

import json
import platform


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "info",
        help="print tfnorm/Python/TensorFlow/Keras versions, devices and the strategy",
        description="Print tfnorm, Python, TensorFlow and Keras versions, the active Keras "
        "flavour, visible CPUs/GPUs and the distribution strategy tfnorm "
        "would choose.",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def collect():
    import tfnorm
    from tfnorm import _keras

    tf = _keras.tf
    info = {"tfnorm": tfnorm.__version__, "python": platform.python_version()}
    info.update(_keras.describe())
    info["cpus"] = [d.name for d in tf.config.list_physical_devices("CPU")]
    info["gpus"] = [d.name for d in tf.config.list_physical_devices("GPU")]
    info["strategy"] = _strategy_choice()
    return info


def _strategy_choice():
    from tfnorm import distribute

    try:
        return distribute.describe_choice()
    except ValueError as error:  # e.g. a malformed TF_CONFIG
        return f"error: {error}"


def run(args):
    info = collect()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    width = max(len(k) for k in info)
    for key, value in info.items():
        if isinstance(value, list):
            value = ", ".join(value) or "none"
        print(f"{key:<{width}}  {value}")
    return 0

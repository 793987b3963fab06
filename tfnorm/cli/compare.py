"""`tfnorm compare`: the Post-LN vs Pre-LN warm-up experiment, measured."""

from __future__ import annotations

import os
import shutil
import sys

DEFAULT_OUTPUT_DIR = os.path.join("runs", "compare")


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "compare",
        help="train Post-LN and Pre-LN with and without warm-up and compare",
        description="Train Post-LN and Pre-LN encoders, each with and without a "
        "learning-rate warm-up, for a few seeds on a synthetic token task "
        "(target = input reversed), then write a table (results.md, results.csv, "
        "results.json), a plot (comparison.png: loss and accuracy curves, "
        "per-layer gradient norms at initialisation) and TensorBoard scalars "
        "into --output-dir. The defaults run in a few minutes on 2 CPU cores.",
    )
    from_defaults = "(default: %(default)s)"
    parser.add_argument(
        "--output-dir",
        default=DEFAULT_OUTPUT_DIR,
        help=f"where the table, plot and TensorBoard logs go {from_defaults}",
    )
    # Defaults are None: unset flags leave the library's defaults in force.
    for flag, kind, text in (
        ("--num-layers", int, "encoder blocks"),
        ("--d-model", int, "model width"),
        ("--num-heads", int, "attention heads"),
        ("--dff", int, "feed-forward width"),
        ("--vocab-size", int, "token vocabulary of the task"),
        ("--seq-len", int, "sequence length of the task"),
        ("--batch-size", int, "batch size"),
        ("--steps", int, "training steps per run"),
        ("--learning-rate", float, "peak learning rate"),
        ("--warmup-steps", int, "linear warm-up length of the warm-up runs"),
        ("--norm", str, "norm for every block: layer, rms or scale"),
        ("--eval-size", int, "sequences in the fixed evaluation set"),
        ("--eval-every", int, "evaluate every N steps"),
    ):
        parser.add_argument(
            flag, type=kind, default=None, help=_with_default(flag, text)
        )
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=None,
        help=_with_default("--seeds", "seeds to run each variant with"),
    )
    parser.add_argument(
        "--no-jit",
        dest="jit_compile",
        action="store_false",
        default=None,
        help="do not XLA-compile the training step",
    )
    parser.set_defaults(func=run)


def _with_default(flag, text):
    from tfnorm.experiments.warmup_settings import DEFAULTS

    value = DEFAULTS[flag[2:].replace("-", "_")]
    if isinstance(value, tuple):
        value = " ".join(str(v) for v in value)
    return f"{text} (default: {value})"


def _options(args):
    """The library options the user set on the command line (None = unset)."""
    from tfnorm.experiments.warmup_settings import DEFAULTS

    return {
        name: getattr(args, name)
        for name in DEFAULTS
        if getattr(args, name, None) is not None
    }


def run(args):
    from tfnorm.experiments.warmup import run_comparison

    result = run_comparison(args.output_dir, **_options(args))
    paths = result["paths"]
    print()
    with open(paths["markdown"]) as f:
        print(f.read())
    print(f"table:       {paths['markdown']} (also {paths['csv']}, {paths['json']})")
    print(f"plot:        {paths['plot']}")
    print(f"tensorboard: {tensorboard_command()} --logdir {paths['tensorboard']}")
    return 0


def tensorboard_command():
    """How to start the TensorBoard of this Python's environment, from here.

    `make demo` runs `.venv/bin/tfnorm` in a shell where the venv is not
    active, so a bare `tensorboard` would be "command not found" (or
    another environment's): the line names `.venv/bin/tensorboard` then.
    """
    beside = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    if not os.access(beside, os.X_OK):
        return "tensorboard"
    on_path = shutil.which("tensorboard")
    if on_path and os.path.realpath(on_path) == os.path.realpath(beside):
        return "tensorboard"
    relative = os.path.relpath(beside)
    return relative if not relative.startswith(os.pardir) else beside

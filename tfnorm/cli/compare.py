"""`tfnorm compare`: the Post-LN vs Pre-LN warm-up experiment, measured.

The flags are generated from `CompareConfig`'s declarations
(`tfnorm.experiments.compare_settings`), and their values are read by the
same code as a notebook's `run_comparison(...)` arguments, so a bad value
gets the same one-line error (exit status 2) from either.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from tfnorm.cli.flags import add_setting_flags, describe, fail, given_settings
from tfnorm.experiments.compare_settings import CompareConfig
from tfnorm.settings.config_error import ConfigError
from tfnorm.settings.readers import creatable

DEFAULT_OUTPUT_DIR = os.path.join("runs", "compare")

EPILOG = """\
examples:
  tfnorm compare                                  # the demo: `make demo`
  tfnorm compare --depths 6 12 18 --output-dir runs/sweep
  tfnorm compare --task mlm --steps 600 --warmup-steps 120 --output-dir runs/mlm
  tfnorm compare --task lm --output-dir runs/compare-lm   # decoders: `make demo-lm`

outputs (in --output-dir): results.md/.csv/.json (the table; every run's
curves in the JSON), steps.csv (every run's steps: loss, gradient norm, loss
scale, applied or skipped, every weight finite), comparison.png,
tensorboard/ (per run: scalars, and norms/ with histograms of every norm
layer's outputs), and with --depths sweep.md/.json and sweep.png.
"""


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "compare",
        help="train Post-LN and Pre-LN with and without warm-up and compare",
        description="Train Post-LN and Pre-LN encoders with and without a "
        "learning-rate warm-up that ends early (then the peak rate is held), "
        "plus a Post-LN control at the warm-up run's mean rate, for a few "
        "seeds on a synthetic token task (reverse) or masked-language "
        "modelling on the Python language reference's prose "
        "(pydoc_data.topics, shipped with CPython); or, with --task lm, "
        "causal decoders predicting the next byte of that text, with "
        "LayerNorm, RMSNorm and DyT compared at Pre-LN (--norms); then write a table, a "
        "plot and TensorBoard logs into --output-dir. The defaults run in a "
        "few minutes on 2 CPU cores.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--output-dir",
        default=DEFAULT_OUTPUT_DIR,
        help="where the table, plot and TensorBoard logs go (default: %(default)s)",
    )
    add_setting_flags(parser, CompareConfig)
    parser.set_defaults(func=run)


def _options(args):
    """The settings given on the command line, as raw values (unset ones absent)."""
    return given_settings(args, CompareConfig)


def run(args):
    try:
        config = CompareConfig.from_dict(_options(args)).resolve()
    except ConfigError as error:
        return fail("compare", describe(error, CompareConfig))
    try:
        # Checked before minutes of training, not when the table is written.
        creatable("directory")("output_dir", args.output_dir)
    except ValueError as error:
        return fail("compare", f"--output-dir: {error}")
    from tfnorm.experiments.compare_experiment import run_comparison

    result = run_comparison(args.output_dir, config=config)
    paths = result["paths"]
    print()
    with open(paths["markdown"]) as f:
        print(f.read())
    print(f"table:       {paths['markdown']} (also {paths['csv']}, {paths['json']})")
    print(f"plot:        {paths['plot']}")
    if "sweep_plot" in paths:
        print(f"sweep:       {paths['sweep_markdown']} and {paths['sweep_plot']}")
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

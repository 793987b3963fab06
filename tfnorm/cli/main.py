"""`tfnorm` entry point: dispatches to one module per subcommand.

Each subcommand module defines `add_parser(subparsers)` (registering its
arguments and `func`) and is listed in `SUBCOMMANDS`. TensorFlow is imported
by the subcommands, not here, so `tfnorm --help` is instant.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = ("tfnorm.cli.info", "tfnorm.cli.train", "tfnorm.cli.compare")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="tfnorm",
        description="Normalisation layers for Transformers in TensorFlow/Keras.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in SUBCOMMANDS:
        importlib.import_module(module_name).add_parser(subparsers)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return args.func(args) or 0


if __name__ == "__main__":
    sys.exit(main())

"""`tfnorm` entry point: dispatches to one module per subcommand.

Each subcommand module defines `add_parser(subparsers)` (registering its
arguments and `func`) and is listed in `SUBCOMMANDS`. Building the parser
imports no TensorFlow (the subcommands import it when they run), so
`tfnorm --help` and `tfnorm train --help` answer at once; see
`tfnorm/__init__.py` for how the `tfnorm` command keeps the package import
light.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = (
    "tfnorm.cli.info",
    "tfnorm.cli.train",
    "tfnorm.cli.predict",
    "tfnorm.cli.compare",
)


class _Parser(argparse.ArgumentParser):
    """Reports a usage error on one stderr line, like the settings' own errors."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser():
    parser = _Parser(
        prog="tfnorm",
        description="Normalisation layers for Transformers in TensorFlow/Keras.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in SUBCOMMANDS:
        importlib.import_module(module_name).add_parser(subparsers)
    return parser


def main(argv=None):
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # argparse gives a subcommand's `nargs="*"` positional only the words
    # before the first option (`tfnorm predict RUN --json TEXT` leaves TEXT
    # over); a subcommand naming that positional in `extra_positionals`
    # gets the rest too. Unknown options stay errors.
    target = getattr(args, "extra_positionals", None)
    if extra and (target is None or any(_is_option(word) for word in extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        getattr(args, target).extend(extra)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return args.func(args) or 0


def _is_option(word):
    return word.startswith("-") and word != "-" and not word[1:2].isdigit()


if __name__ == "__main__":
    sys.exit(main())

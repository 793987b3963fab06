"""`tfnorm` entry point: dispatches to one module per subcommand.

Each subcommand module defines `add_parser(subparsers)` (registering its
arguments and `func`) and is listed in `SUBCOMMANDS`. Building the parser
imports no TensorFlow (the subcommands import it when they run), so
`tfnorm --help` and `tfnorm train --help` answer at once; see
`tfnorm/__init__.py` for how the `tfnorm` command keeps the package import
light.

TensorFlow's C++ start-up log (oneDNN, CPU features, CUDA probing) is kept
out of the commands' output unless `--verbose` is given or
`TF_CPP_MIN_LOG_LEVEL` is set in the environment; see `quiet_tensorflow`.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile

SUBCOMMANDS = (
    "tfnorm.cli.info",
    "tfnorm.cli.train",
    "tfnorm.cli.predict",
    "tfnorm.cli.generate",
    "tfnorm.cli.export",
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
    parser.add_argument("-v", "--verbose", **_VERBOSE)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in SUBCOMMANDS:
        importlib.import_module(module_name).add_parser(subparsers)
    # Also accepted after the subcommand (`tfnorm train ... --verbose`).
    # SUPPRESS: a subcommand's default must not undo a `--verbose` given
    # before it.
    for subparser in subparsers.choices.values():
        subparser.add_argument("-v", "--verbose", default=argparse.SUPPRESS, **_VERBOSE)
    return parser


_VERBOSE = dict(
    action="store_true",
    help="show TensorFlow's C++ log (start-up lines, CUDA errors); hidden "
    "unless this is given or TF_CPP_MIN_LOG_LEVEL is set",
)

#: What TF_CPP_MIN_LOG_LEVEL is set to for a command: 3 hides INFO, WARNING
#: and ERROR lines. The ERROR lines hidden at start-up are a CUDA build's
#: "failed call to cuInit" on a machine without a GPU; errors that stop a
#: command reach Python as exceptions and are reported as usual.
QUIET_LOG_LEVEL = "3"

# A line of TensorFlow's C++ log: severity letter, date, time, thread,
# file:line] (TF 2.21 writes the time as 00:00:<epoch seconds>). absl prints
# its notice once before its first line.
_LOG_LINE = re.compile(rb"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^ \]]+:\d+\] ")
_ABSL_NOTICE = b"WARNING: All log messages before absl::InitializeLog() is called"
_SEVERITY = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}


def quiet_tensorflow(verbose=False):
    """Keeps TensorFlow's C++ start-up log out of a command's output.

    Sets `TF_CPP_MIN_LOG_LEVEL` unless the user set it (or asked for
    `--verbose`). Some lines are logged while TensorFlow's libraries load,
    before that setting is read (TF 2.21's "oneDNN custom operations are on"
    and absl's notice before it), so the first `import tensorflow` (by
    whichever module needs it; a command that needs none imports none) runs
    with file descriptor 2 captured, and the captured output is written back
    without the log lines the setting would have hidden. Everything else
    printed meanwhile (Python warnings, errors) is kept.
    """
    if verbose or "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = QUIET_LOG_LEVEL
    if "tensorflow" not in sys.modules:
        sys.meta_path.insert(0, _QuietTensorFlowImport())


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)  # once, and the real finders answer
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader.exec_module = _quietly(spec.loader.exec_module)
        return spec


def _quietly(exec_module):
    def run(module):
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (AttributeError, OSError, ValueError):  # no stderr to keep clean
            return exec_module(module)
        captured = tempfile.TemporaryFile()
        try:
            os.dup2(captured.fileno(), 2)
            try:
                return exec_module(module)
            finally:
                if sys.stderr is not None:
                    sys.stderr.flush()
                os.dup2(saved, 2)
                captured.seek(0)
                level = int(QUIET_LOG_LEVEL)
                kept = b"".join(
                    line for line in captured if not is_hidden_log_line(line, level)
                )
                if kept:
                    os.write(2, kept)
        finally:
            os.close(saved)
            captured.close()

    return run


def is_hidden_log_line(line, level=int(QUIET_LOG_LEVEL)):
    """True for a line (bytes) of TensorFlow's C++ log below `level`, or
    absl's notice before it: what a quiet command leaves out."""
    if line.startswith(_ABSL_NOTICE):
        return True
    match = _LOG_LINE.match(line)
    return bool(match) and _SEVERITY[match.group(1)] < level


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
    # Not a setting of the subcommand: `tfnorm train` reads every other
    # attribute as one.
    quiet_tensorflow(verbose=vars(args).pop("verbose", False))
    return args.func(args) or 0


def _is_option(word):
    return word.startswith("-") and word != "-" and not word[1:2].isdigit()


if __name__ == "__main__":
    sys.exit(main())

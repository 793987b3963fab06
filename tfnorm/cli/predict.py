"""`tfnorm predict`: classifies texts with the exported model of a finished run.

A thin layer over `tfnorm.inference.prediction.Predictor`, its flags
generated from `PredictSettings`'s declarations (as `tfnorm train`'s from
`TrainConfig`'s). Building the parser imports no TensorFlow; the model is
loaded when the command runs.

Exit statuses: 0 printed every prediction; 2 bad arguments, no usable
export in RUN_DIR (missing, damaged, of another run, or a run of the user's
own model) or an unreadable file (one line on stderr, nothing printed); 74
(EX_IOERR) the predictions could not all be written (stdout closed, a closed
pipe, a full disk; one line on stderr says how many were).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tfnorm.cli.flags import add_setting_flags, fail, given_settings, with_flags
from tfnorm.inference.predict_settings import PredictSettings
from tfnorm.settings.config_error import ConfigError
from tfnorm.training.config.train_config import TrainConfig

EPILOG = """\
examples:
  tfnorm predict runs/reviews "a wonderful, moving film" "dull and far too long"
  tfnorm predict runs/reviews --file new_reviews.txt --json > predictions.jsonl
  some_command | tfnorm predict runs/reviews --file -

output: one line per text, in order: the predicted class name, its
probability, every class's probability (name=p, in class-id order) and the
text, separated by tabs. With --json: one JSON object per line with `text`,
`label` and `probabilities`.

RUN_DIR is the --logdir of a finished `tfnorm train --data ...` run: it holds
the exported model (model.keras, or the SavedModel directory `model` on
TensorFlow 2.9), vocabulary.json and labels.json. A run of your own model
(--model-fn) is loaded in Python instead: its summary.json says how.

exit status: 0 every prediction printed; 2 bad arguments, or RUN_DIR has no
usable export (missing, damaged, another run's files), or a --file that
cannot be read (at most 32 MiB); 74 the output could not be written (stdout
closed, a closed pipe, a full disk).
"""

#: Bytes of text `--file` (or stdin) may give: read no further.
MAX_TEXT_BYTES = 32 << 20

#: The exit status when the predictions cannot all be written (EX_IOERR).
OUTPUT_FAILED = 74


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "predict",
        help="classify texts with the exported model of a finished text run",
        description="Print the predicted class and the class probabilities of "
        "each text, from the model, vocabulary and class names a finished "
        "`tfnorm train --data ...` run exported to its logdir.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the run's --logdir")
    parser.add_argument(
        "texts", metavar="TEXT", nargs="*", default=[], help="texts to classify"
    )
    parser.add_argument(
        "--file",
        metavar="F",
        default=None,
        help="also classify each non-blank line of F (UTF-8; - for stdin)",
    )
    add_setting_flags(parser, PredictSettings)
    parser.set_defaults(func=run, extra_positionals="texts")


def _fail(message):
    print(f"tfnorm predict: error: {' '.join(str(message).split())}", file=sys.stderr)
    return 2


def read_lines(path):
    """The non-blank lines of `path` (`-`: stdin), without line ends.

    Raises:
        ValueError: the file cannot be read or is not UTF-8; says which line.
    """
    return [line for line in read_text(path).splitlines() if line.strip()]


def read_text(path):
    """The text of `path` (`-`: stdin), at most `MAX_TEXT_BYTES` of UTF-8.

    Raises:
        ValueError: the file cannot be read or is not UTF-8; says which line.
    """
    try:
        if path == "-":
            raw = sys.stdin.buffer.read(MAX_TEXT_BYTES + 1)
        else:
            with open(path, "rb") as handle:
                raw = handle.read(MAX_TEXT_BYTES + 1)
    except (OSError, AttributeError) as error:  # AttributeError: stdin closed
        reason = getattr(error, "strerror", None) or "it is closed"
        raise ValueError(
            f"--file {path}: cannot be read ({reason}). Received: --file={path!r}"
        ) from None
    if len(raw) > MAX_TEXT_BYTES:
        raise ValueError(
            f"--file {path}: more than {MAX_TEXT_BYTES >> 20} MiB of text (a "
            "device or an endless stream?); split it into smaller files. "
            f"Received: --file={path!r}"
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise ValueError(
            f"--file {path}, line {line}: not UTF-8 text ({error.reason}); "
            "save the file as UTF-8."
        ) from None
    return text


def format_line(result):
    """One tab-separated output line for a `Predictor.predict` result."""
    probabilities = result["probabilities"]
    shown = " ".join(f"{name}={p:.3f}" for name, p in probabilities.items())
    text = " ".join(result["text"].split())
    return f"{result['label']}\t{probabilities[result['label']]:.3f}\t{shown}\t{text}"


def run(args):
    if sys.stdout is None:  # started with stdout closed (`>&-`)
        return fail_output("predict", "stdout is closed; nothing was classified")
    texts = list(args.texts)
    if args.file:
        try:
            texts += read_lines(args.file)
        except ValueError as error:
            return _fail(error)
    if not texts:
        return _fail(
            "no texts to classify: give TEXT arguments or --file F "
            "(see tfnorm predict --help)"
        )

    try:
        settings = PredictSettings.from_dict(
            given_settings(args, PredictSettings)
        ).resolve()
    except ConfigError as error:
        return _fail(with_flags(error, PredictSettings))

    from tfnorm.inference.prediction import PredictionError, Predictor

    try:
        predictor = Predictor(args.run_dir)
    except PredictionError as error:
        # The run's settings it names are `tfnorm train` flags.
        return _fail(with_flags(error, TrainConfig))
    results = predictor.predict(texts, batch_size=settings.batch_size)
    return write_results(results, settings.json)


def write_results(results, as_json):
    """Prints one line per result; a stdout that stops taking them ends the
    command with one line on stderr and `OUTPUT_FAILED`."""
    lines = (
        json.dumps(result, ensure_ascii=False) if as_json else format_line(result)
        for result in results
    )
    return write_lines("predict", lines, len(results), "predictions")


def write_lines(command, lines, total, noun):
    """Prints each of `lines` (`total` of them, `noun` in the error); a stdout
    that stops taking them ends `tfnorm COMMAND` with one line on stderr
    and `OUTPUT_FAILED`."""
    written = 0
    try:
        for line in lines:
            sys.stdout.write(line + "\n")
            written += 1
        sys.stdout.flush()
    except (OSError, ValueError) as error:  # ValueError: a closed file
        reason = getattr(error, "strerror", None) or str(error)
        return fail_output(
            command,
            f"stdout stopped taking output ({reason}); stopped after {written} "
            f"of {total} {noun}",
        )
    return 0


def fail_output(command, message):
    """One line on stderr; stdout pointed at /dev/null, so that Python's own
    flush at exit finds nothing left to complain about."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass
    fail(command, message)
    return OUTPUT_FAILED

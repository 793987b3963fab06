"""`tfnorm predict`: classifies texts with the exported model of a finished run.

A thin layer over `tfnorm.training.prediction.Predictor`. Building the
parser imports no TensorFlow; the model is loaded when the command runs.

Exit statuses: 0 printed every prediction, 2 bad arguments, no export in
RUN_DIR or an unreadable file (one line on stderr, nothing printed).
"""

from __future__ import annotations

import argparse
import json
import sys

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
TensorFlow 2.9), vocabulary.json and labels.json.
"""


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "predict",
        help="classify texts with the exported model of a finished text run",
        description="Print the predicted class and the class probabilities of "
        "each text, from the model, vocabulary and class names a finished "
        "`tfnorm train --data ...` run exported to its logdir.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the run's --logdir")
    parser.add_argument("texts", metavar="TEXT", nargs="*", help="texts to classify")
    parser.add_argument(
        "--file",
        metavar="F",
        help="also classify each non-blank line of F (UTF-8; - for stdin)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object per line"
    )
    parser.add_argument(
        "--batch-size",
        type=_positive,
        default=256,
        metavar="N",
        help="texts per model call (default 256)",
    )
    parser.set_defaults(func=run, extra_positionals="texts")


def _positive(value):
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(
            f"must be a positive integer. Received: {value!r}"
        )
    return number


def _fail(message):
    print(f"tfnorm predict: error: {' '.join(str(message).split())}", file=sys.stderr)
    return 2


def read_lines(path):
    """The non-blank lines of `path` (`-`: stdin), without line ends.

    Raises:
        ValueError: the file cannot be read or is not UTF-8; says which line.
    """
    if path == "-":
        return [line.rstrip("\r\n") for line in sys.stdin if line.strip()]
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as error:
        raise ValueError(
            f"--file {path}: cannot be read ({error.strerror or error}). "
            f"Received: --file={path!r}"
        ) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise ValueError(
            f"--file {path}, line {line}: not UTF-8 text ({error.reason}); "
            "save the file as UTF-8."
        ) from None
    return [line for line in text.splitlines() if line.strip()]


def format_line(result):
    """One tab-separated output line for a `Predictor.predict` result."""
    probabilities = result["probabilities"]
    shown = " ".join(f"{name}={p:.3f}" for name, p in probabilities.items())
    text = " ".join(result["text"].split())
    return f"{result['label']}\t{probabilities[result['label']]:.3f}\t{shown}\t{text}"


def run(args):
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

    from tfnorm.training.prediction import PredictionError, Predictor

    try:
        predictor = Predictor(args.run_dir)
    except PredictionError as error:
        return _fail(error)
    for result in predictor.predict(texts, batch_size=args.batch_size):
        if args.json:
            print(json.dumps(result, ensure_ascii=False))
        else:
            print(format_line(result))
    sys.stdout.flush()
    return 0

"""`tfnorm export`: a language-model run's model as a Hugging Face checkpoint.

The model is read as `tfnorm generate` reads it
(`tfnorm.inference.text_generation.TextGenerator`: the run's export, else
its newest checkpoint) and written by `tfnorm.models.decoder_to_hf` with the
run's tokenizer. The files go to a temporary folder beside OUT that is
renamed to OUT once complete, so a refused layout or a failed write leaves
nothing behind. Building the parser imports no TensorFlow.

Exit statuses: 0 the checkpoint was written; 2 bad arguments, a RUN_DIR
that is not a language-model run or whose model cannot be read, an OUT that
exists and is not an empty directory, or a model no Hugging Face layout
holds (one line on stderr, nothing written); 74 the files could not be
written (a full disk, no permission).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

from tfnorm.cli.flags import fail, with_flags
from tfnorm.training.config.train_config import TrainConfig

#: `--format` choices: the checkpoint layouts `tfnorm export` writes.
FORMATS = ("hf",)

EPILOG = """\
examples:
  tfnorm export runs/lm runs/lm-hf
  tfnorm export runs/lm runs/lm-hf --format hf

RUN_DIR is the --logdir of a `tfnorm train --task lm ...` run, finished (its
exported model is written) or still training (its newest checkpoint). OUT is
a new directory (or an empty one) that receives config.json,
generation_config.json, model.safetensors (float32) and the run's tokenizer:
a Llama layout for the llama preset (Qwen2's with biases on q/k/v only), a
GPT-2 layout for the gpt2 preset. `tfnorm.models.decoder_from_hf(OUT)`,
`tfnorm generate OUT` and transformers' from_pretrained(OUT) read it. A run
on bytes gets tfnorm's byte tokenizer (tfnorm_tokenizer.json, which
tfnorm reads; transformers has no tokenizer for it: its ids are the UTF-8
bytes, 256 ends a text). A model no Hugging Face layout holds (Post-LN,
DyT, ...) is refused, naming the option.

exit status: 0 written; 2 bad arguments, RUN_DIR has no usable model, OUT is
not new or empty, or the model has no Hugging Face layout (nothing written);
74 the files could not be written.
"""


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "export",
        help="write a language-model run's model as a Hugging Face checkpoint",
        description="Write the model of a `tfnorm train --task lm` run (its "
        "export, or its newest checkpoint while it trains) and its tokenizer "
        "as a Hugging Face checkpoint directory.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the run's --logdir")
    parser.add_argument(
        "out", metavar="OUT", help="the checkpoint directory to write (new or empty)"
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="hf",
        help="the checkpoint layout: hf (Hugging Face safetensors; the default)",
    )
    parser.set_defaults(func=run)


def _fail(message):
    return fail("export", message)


def run(args):
    out = args.out
    if os.path.lexists(out) and not (
        os.path.isdir(out) and not os.path.islink(out) and not os.listdir(out)
    ):
        return _fail(
            f"{out} exists and is not an empty directory; give a new directory "
            f"(nothing is replaced). Received: OUT={out!r}"
        )
    from tfnorm.training.rundir.reading import RunDirectoryError, read_recipe

    try:
        read_recipe(args.run_dir)  # a checkpoint directory is not a run
        generator = _generator(args.run_dir)
    except RunDirectoryError as error:
        return _fail(with_flags(error, TrainConfig))
    from tfnorm.checkpoints import ByteTokenizer, CheckpointError

    tokenizer = generator.tokenizer or ByteTokenizer()
    try:
        names = _write(generator.model, out, tokenizer)
    except CheckpointError as error:
        return _fail(f"the model of {args.run_dir} cannot be written: {error}")
    except OSError as error:
        print(f"tfnorm export: error: {out}: {error}", file=sys.stderr)
        return 74
    model_type = _model_type(out)
    print(
        f"wrote {out}: a {model_type} checkpoint of {generator.source} "
        f"({', '.join(sorted(names))})"
    )
    return 0


def _generator(run_dir):
    from tfnorm.inference.text_generation import TextGenerator

    return TextGenerator(run_dir)


def _write(model, out, tokenizer):
    """`decoder_to_hf` into a folder beside `out`, renamed to `out` when
    whole; what it created is removed when it fails."""
    from tfnorm.models import decoder_to_hf

    parent = os.path.dirname(os.path.abspath(out))
    created = _first_missing(parent)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".export-", dir=parent)
    try:
        names = decoder_to_hf(model, staging, tokenizer=tokenizer)
        if os.path.isdir(out):
            os.rmdir(out)  # empty: checked before anything was read
        os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise
    return names


def _first_missing(path):
    """The outermost missing folder on `path` (what `makedirs` would
    create first), or None when `path` exists."""
    missing = None
    while not os.path.isdir(path):
        missing, path = path, os.path.dirname(path)
        if path == missing:
            break
    return missing


def _model_type(out):
    import json

    with open(os.path.join(out, "config.json"), encoding="utf-8") as handle:
        return json.load(handle).get("model_type", "?")

"""`tfnorm generate`: text sampled from a language-model run.

A thin layer over `tfnorm.inference.text_generation.TextGenerator`. The
flags are generated from `GenerateSettings`'s declarations, as `tfnorm
train`'s are from `TrainConfig`'s; the input and output handling is `tfnorm
predict`'s (the same `--file` reading, the same one-line errors, the same
exit status when stdout stops taking output). Building the parser imports
no TensorFlow.

Exit statuses: 0 printed every text; 2 bad arguments, an empty prompt, or a
RUN_DIR that is not a language-model run or whose export is damaged (one
line on stderr, nothing printed); 74 the output could not all be written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tfnorm.cli.flags import add_setting_flags, fail, given_settings, with_flags
from tfnorm.cli.predict import fail_output, read_text, write_lines
from tfnorm.inference.generate_settings import GenerateSettings
from tfnorm.settings.config_error import ConfigError
from tfnorm.training.config.train_config import TrainConfig

EPILOG = """\
examples:
  tfnorm generate runs/lm "The " --max-new-tokens 200 --seed 1
  tfnorm generate runs/lm --file prompt.txt --temperature 0.8 --top-k 20 --json

RUN_DIR is the --logdir of a `tfnorm train --task lm ...` run, finished (its
exported model is used) or still training (its newest checkpoint is used), or
a Hugging Face checkpoint directory (Llama, Mistral, Qwen2, GPT-2 safetensors
with its tokenizer.json; its tokens instead of bytes).
Each PROMPT, and the text of --file, is continued (--num-samples times, with
seeds S, S+1, ...); the output is each prompt and its continuation, printed as
the bytes are made, or with --json one JSON object a line with `prompt`, `text`
(the continuation) and `seed` (which gives that text again). The same --seed
gives the same text. Sampling: --temperature 0 picks the likeliest byte each
step; --top-k K (K >= 1) samples among the K likeliest, --top-p P among the
likeliest whose probability reaches P; --top-k with --top-p is refused (two
samplers); neither samples among all bytes. Past the model's context the
window slides: each further byte is computed from the last context-full of
bytes; a longer prompt is cropped to its last bytes (one line on stderr).

exit status: 0 every text printed; 2 bad arguments, an empty prompt, or
RUN_DIR is not a language-model run or has no usable model; 74 the output
could not be written (stdout closed, a closed pipe, a full disk).
"""


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "generate",
        help="sample text from a language-model run (tfnorm train --task lm)",
        description="Continue each prompt with text sampled from the model of a "
        "`tfnorm train --task lm` run: its export, or its newest checkpoint "
        "while it trains.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument(
        "run_dir",
        metavar="RUN_DIR",
        help="the run's --logdir, or a Hugging Face checkpoint directory",
    )
    parser.add_argument(
        "prompts", metavar="PROMPT", nargs="*", default=[], help="texts to continue"
    )
    parser.add_argument(
        "--file",
        metavar="F",
        default=None,
        help="also continue the whole text of F (UTF-8; - for stdin)",
    )
    add_setting_flags(parser, GenerateSettings)
    parser.set_defaults(func=run, extra_positionals="prompts")


def _fail(message):
    return fail("generate", message)


def run(args):
    if sys.stdout is None:  # started with stdout closed (`>&-`)
        return fail_output("generate", "stdout is closed; nothing was generated")
    prompts = list(args.prompts)
    if args.file:
        try:
            prompts.append(read_text(args.file))
        except ValueError as error:
            return _fail(error)
    if not prompts:
        return _fail(
            "no prompt to continue: give PROMPT arguments or --file F "
            "(see tfnorm generate --help)"
        )
    if not all(prompts):
        return _fail(
            "a prompt is empty; give some text to continue. Received: PROMPT=''"
        )
    for prompt in args.prompts:
        try:
            prompt.encode("utf-8")
        except UnicodeEncodeError as error:
            # A byte of argv that is not UTF-8 arrives as a lone surrogate.
            raw = os.fsencode(prompt)
            return _fail(
                f"PROMPT is not UTF-8 text (byte {error.start + 1} cannot be "
                f"decoded); give the text in UTF-8. Received: PROMPT={raw!r}"
            )
    try:
        settings = GenerateSettings.from_dict(
            given_settings(args, GenerateSettings)
        ).resolve()
    except ConfigError as error:
        return _fail(with_flags(error, GenerateSettings))
    seed = settings.seed
    if seed is None:
        import random

        seed = random.randrange(2**31 - 1 - settings.num_samples)

    from tfnorm.inference.text_generation import TextGenerator
    from tfnorm.training.rundir.reading import RunDirectoryError

    try:
        generator = TextGenerator(args.run_dir)
    except RunDirectoryError as error:
        return _fail(with_flags(error, TrainConfig))
    jobs = [(p, seed + j) for p in prompts for j in range(settings.num_samples)]
    lines = (_one_text(generator, settings, prompt, s) for prompt, s in jobs)
    return write_lines("generate", lines, len(jobs), "texts")


def _one_text(generator, settings, prompt, seed):
    """Generates one continuation; without --json, writes it as it comes
    and returns the empty rest of its line."""
    import warnings

    if (
        generator.tokenizer is None
        and len(prompt.encode("utf-8", "surrogatepass")) > generator.max_len
    ):
        sys.stderr.write(
            f"tfnorm generate: the prompt is longer than the model's context "
            f"({generator.max_len} bytes): it is cropped to its last "
            f"{generator.max_len} bytes\n"
        )
    stream = None
    if not settings.json:
        sys.stdout.write(prompt)
        sys.stdout.flush()

        def stream(piece):
            sys.stdout.write(piece)
            sys.stdout.flush()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the crop: said on stderr above
        text = generator.complete(
            prompt,
            settings.max_new_tokens,
            temperature=settings.temperature,
            top_k=settings.top_k,
            top_p=settings.top_p,
            seed=seed,
            stop_strings=list(settings.stop),
            callback=stream,
        )
    if stream is not None:
        return ""
    record = {"prompt": prompt, "text": text[len(prompt) :], "seed": seed}
    return json.dumps(record, ensure_ascii=False)

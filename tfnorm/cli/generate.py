"""`tfnorm generate`: text sampled from a language-model run.

A thin layer over `tfnorm.inference.text_generation.TextGenerator`, with the
input and output handling of `tfnorm predict` (the same `--file` reading,
the same one-line errors, the same exit status when stdout stops taking
output). Building the parser imports no TensorFlow.

Exit statuses: 0 printed every text; 2 bad arguments, an empty prompt, or a
RUN_DIR that is not a language-model run or whose export is damaged (one
line on stderr, nothing printed); 74 the output could not all be written.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from tfnorm.cli.flags import fail, with_flags
from tfnorm.cli.predict import fail_output, read_text, write_lines
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
    )
    parser.add_argument(
        "run_dir",
        metavar="RUN_DIR",
        help="the run's --logdir, or a Hugging Face checkpoint directory",
    )
    parser.add_argument(
        "prompts", metavar="PROMPT", nargs="*", help="texts to continue"
    )
    parser.add_argument(
        "--file",
        metavar="F",
        help="also continue the whole text of F (UTF-8; - for stdin)",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        metavar="N",
        help="bytes to add to each prompt (default: up to the model's context)",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        metavar="T",
        help="divides the logits before sampling; 0 for the likeliest byte (default 1.0)",
    )
    parser.add_argument(
        "--top-k",
        type=int,
        metavar="K",
        help="sample among the K likeliest bytes (K >= 1; not with --top-p)",
    )
    parser.add_argument(
        "--top-p",
        type=float,
        metavar="P",
        help="sample among the likeliest bytes whose probability reaches P "
        "(0 < P <= 1; not with --top-k)",
    )
    parser.add_argument(
        "--num-samples",
        type=int,
        default=1,
        metavar="N",
        help="continuations of each prompt, with seeds S, S+1, ... (default 1)",
    )
    parser.add_argument(
        "--stop",
        action="append",
        default=[],
        metavar="TEXT",
        help="end a continuation after TEXT (repeatable; the end-of-text byte "
        "always ends one)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        metavar="S",
        help="seed of the sampling (default: a random one)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object per line"
    )
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
    error = _bad_number(args)
    if error:
        return _fail(error)
    seed = args.seed
    if seed is None:
        import random

        seed = random.randrange(2**31 - 1 - args.num_samples)

    from tfnorm.inference.text_generation import TextGenerator
    from tfnorm.training.rundir.reading import RunDirectoryError

    try:
        generator = TextGenerator(args.run_dir)
    except RunDirectoryError as error:
        return _fail(with_flags(error, TrainConfig))
    jobs = [(p, seed + j) for p in prompts for j in range(args.num_samples)]
    lines = (_one_text(generator, args, prompt, s) for prompt, s in jobs)
    return write_lines("generate", lines, len(jobs), "texts")


def _one_text(generator, args, prompt, seed):
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
    if not args.json:
        sys.stdout.write(prompt)
        sys.stdout.flush()

        def stream(piece):
            sys.stdout.write(piece)
            sys.stdout.flush()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the crop: said on stderr above
        text = generator.complete(
            prompt,
            args.max_new_tokens,
            temperature=args.temperature,
            top_k=args.top_k,
            top_p=args.top_p,
            seed=seed,
            stop_strings=args.stop,
            callback=stream,
        )
    if stream is not None:
        return ""
    record = {"prompt": prompt, "text": text[len(prompt) :], "seed": seed}
    return json.dumps(record, ensure_ascii=False)


def _bad_number(args):
    """The message for the first flag whose value cannot be used, built with
    the flag's name (the checks `tfnorm.generate` makes of its arguments,
    made here first so that the message names the flag), or None."""
    if args.top_k is not None and args.top_p is not None:
        return (
            "--top-k and --top-p choose two different samplers; give one. "
            f"Received: --top-k={args.top_k}, --top-p={args.top_p:g}"
        )
    checks = (
        ("--num-samples", args.num_samples, "at least 1", lambda n: n >= 1),
        ("--max-new-tokens", args.max_new_tokens, "at least 1", lambda n: n >= 1),
        ("--top-k", args.top_k, "an integer >= 1", lambda k: k >= 1),
        ("--top-p", args.top_p, "a number in (0, 1]", lambda p: 0 < p <= 1),
        ("--temperature", args.temperature, "a number >= 0", lambda t: 0 <= t),
    )
    for flag, value, wanted, fits in checks:
        if value is not None and not (math.isfinite(value) and fits(value)):
            shown = f"{value:g}" if isinstance(value, float) else value
            return f"{flag} must be {wanted}. Received: {flag}={shown}"
    return None

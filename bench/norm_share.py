"""What the norms take of a decoder's training step as it widens: measured time against counted operations.

Claim 2 of docs/claims.md ("RMSNorm saves about 7% of the compute") at
widths 256 to 1024. For each width d, both presets (`llama`: RMSNorm and
SwiGLU; `gpt2`: LayerNorm, GELU and its dropout) build
`tfnorm.build_decoder` with `bench/decoder.py`'s depth, vocabulary and
sequence (4 layers, vocabulary 4096, sequence 128), heads of 64 features
(d / 64 heads) and a feed-forward 4 d wide, three times: with
`norm="rms"`, `norm="layer"` and an identity norm. Their training steps
(forward, next-token loss, backward, Adam, in one `tf.function`; graph
mode, and with `--xla` also `jit_compile=True`) run interleaved with a
second identity-norm decoder's, the order alternating each round, as in
`bench/decoder.py`'s third table. A norm's cost is its step less the
identity step's in the same round (median over every round); the table
gives it as a share of that norm's step. The second identity decoder,
measured the same way, has nothing to find: its figure is the method's
noise floor, and a norm's share within it is not resolved. Beside them,
the share the norms have of the forward pass's counted floating-point
operations (`bench/norm_flops.py`) at the same sizes. The batch is
smaller than `bench/decoder.py`'s (4 sequences, not 16), so that a
d-1024 step takes about a second on 2 CPU cores; at a small batch each
kernel's fixed cost weighs more, and the shares at d 256 may come out
above that table's.

    python bench/norm_share.py [--widths 256 512 1024] [--batch 4]
        [--rounds 4] [--repeats 3] [--xla] [--require-idle]
        [--markdown FILE] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import decoder  # noqa: E402
from bench.decoder_tables import NORMS, pooled, step_share  # noqa: E402
from bench.machine import Run, add_report_arguments  # noqa: E402
from bench.norm_flops import norm_shares  # noqa: E402
from tfnorm._keras import keras, tf  # noqa: E402

HEAD_SIZE = 64
WIDTHS = (256, 512, 1024)
BATCH = 4
PRESETS = {"llama": True, "gpt2": False}  # preset -> gated feed-forward
#: A second identity-norm decoder: its "cost" against the first is what the
#: method reads where there is nothing to find, the table's noise floor.
NULL = "identity_again"


def sizes_at(width):
    """(d_model, heads, dff) of the decoder at `width`."""
    return width, width // HEAD_SIZE, 4 * width


def counted_shares(width, gated):
    """The norms' share of the forward pass's counted operations at `width`,
    for RMSNorm and LayerNorm."""
    d_model, heads, dff = sizes_at(width)
    sizes = dict(
        d_model=d_model,
        num_layers=decoder.LAYERS,
        num_heads=heads,
        dff=dff,
        vocab_size=decoder.VOCAB,
        context=decoder.SEQ,
        gated=gated,
    )
    shares = norm_shares(sizes)
    return {"rms": shares["rms_share"], "layer": shares["layer_share"]}


def measure(args):
    rows, raw = [], []
    modes = [("graph", False)] + ([("XLA", True)] if args.xla else [])
    for width in args.widths:
        for preset, gated in PRESETS.items():
            counted = counted_shares(width, gated)
            for mode, jit_compile in modes:
                keras.utils.set_random_seed(0)
                calls = {
                    name: decoder.norm_step(
                        preset,
                        "identity" if name == NULL else name,
                        jit_compile,
                        sizes_at(width),
                        args.batch,
                    )
                    for name in NORMS + (NULL,)
                }
                repetitions = decoder.interleave(calls, args, args.rounds)
                times = pooled(repetitions)
                measured = {n: step_share(times, n) for n in ("rms", "layer", NULL)}
                rows.append(
                    f"| {width} | {preset} | {mode} | {measured['rms']:.1%} | "
                    f"{measured['layer']:.1%} | {measured[NULL]:+.1%} | "
                    f"{counted['rms']:.2%} | {counted['layer']:.2%} |"
                )
                print(rows[-1], flush=True)
                raw.append(
                    {
                        "width": width,
                        "preset": preset,
                        "mode": mode,
                        "seconds": repetitions,
                        "measured": measured,
                        "counted": counted,
                    }
                )
    return rows, raw


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--widths",
        type=int,
        nargs="+",
        default=list(WIDTHS),
        help=f"d_model values, each a multiple of the head size {HEAD_SIZE}",
    )
    parser.add_argument("--batch", type=int, default=BATCH, help="sequences a step")
    parser.add_argument("--rounds", type=int, default=4, help="training steps")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--xla", action="store_true", help="also time jit_compile")
    add_report_arguments(parser, "every time")
    args = parser.parse_args(argv)
    bad = [w for w in args.widths if w < HEAD_SIZE or w % HEAD_SIZE]
    if bad:
        parser.error(
            f"--widths must be positive multiples of the head size {HEAD_SIZE}; "
            f"received {' '.join(map(str, bad))}"
        )
    if min(args.batch, args.rounds, args.repeats) < 1:
        parser.error("--batch, --rounds and --repeats must be at least 1")
    if args.warmup < 1:
        parser.error("--warmup must be at least 1 (the first call compiles)")
    return args


def main(argv=None):
    args = parse_args(argv)
    run = Run("wall", args.require_idle)
    print(run.header(), flush=True)
    method = (
        f"{decoder.LAYERS} layers, heads of {HEAD_SIZE}, dff 4 x d_model, "
        f"vocabulary {decoder.VOCAB}; seq {decoder.SEQ}, batch {args.batch}; "
        f"{args.repeats} repetitions x {args.rounds} interleaved steps each of "
        f"rms, layer and two identity norms; {args.warmup} warm-up call(s) each"
    )
    print(method, flush=True)
    with tf.device(run.device):
        rows, raw = measure(args)
    run.finish()
    table = "\n".join(
        [
            "What the norms take of the training step (step time minus the "
            "identity-norm step's in the same round, median over every round, "
            "as a share of that step) and of the forward pass's counted "
            "operations:",
            "",
            "| d_model | preset | mode | rms share of the step | layer share of "
            "the step | noise floor (a second identity step) | rms share of the "
            "operations | layer share of the operations |",
            "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |",
            *rows,
        ]
    )
    run.report(method, table, args.markdown, args.json, widths=raw)


if __name__ == "__main__":
    main()

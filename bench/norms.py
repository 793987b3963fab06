"""Benchmark tfnorm's norms against Keras's built-in layers.

Times forward and forward+backward (gradients w.r.t. x, gamma, beta) in graph
mode (`tf.function`) and under XLA (`jit_compile=True`), at three activation
shapes, in float32 and with `mixed_bfloat16` layers on bfloat16 inputs
(`--dtypes` picks). Every step is traced and warmed up first; then the
variants of one setting run interleaved (the order rotates each round) and
the median of `--rounds` calls per variant is kept. That comparison is
repeated `--repeats` times (default 3, spread over the run), and each table
cell gives the median ratio over the repetitions with its spread (min-max):
the ratio to Keras's built-in LayerNormalization, geometric mean over the
shapes. A second table gives the same times as multiples of an elementwise
floor (`x * 2.0`, read once, write once) timed in the same rounds.

Wall clock by default. The run checks the load average first and warns
loudly when the machine is busy (`--require-idle` refuses instead, exit 2):
record figures from an idle machine only. The header states versions, clock,
load before and after, date and the run's duration.

    python bench/norms.py [--rounds 12] [--repeats 3] [--require-idle]
        [--shapes 32x128x768,...] [--markdown FILE] [--json FILE]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import tfnorm  # noqa: E402
from bench.machine import Run, add_report_arguments  # noqa: E402
from tfnorm._keras import keras, tf  # noqa: E402

# Each variant is traced once per shape: TensorFlow's retracing warning is
# expected here.
tf.get_logger().setLevel("ERROR")

SHAPES = ((32, 128, 768), (8, 512, 1024), (256, 64, 256))
BASELINE = "keras LayerNormalization"
FLOOR = "floor x*2"
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def make_variants(policy):
    """name -> layer factory. Both LayerNormalizations use Keras's epsilon
    (1e-3), which also keeps Keras 2.9 on its fused-kernel path."""
    variants = {
        BASELINE: lambda: keras.layers.LayerNormalization(epsilon=1e-3, dtype=policy),
        "tfnorm LayerNormalization": lambda: tfnorm.LayerNormalization(
            epsilon=1e-3, dtype=policy
        ),
        "tfnorm RMSNorm": lambda: tfnorm.RMSNorm(dtype=policy),
        "tfnorm ScaleNorm": lambda: tfnorm.ScaleNorm(dtype=policy),
        "tfnorm DynamicTanh": lambda: tfnorm.DynamicTanh(dtype=policy),
    }
    if hasattr(keras.layers, "RMSNormalization"):
        variants["keras RMSNormalization"] = lambda: keras.layers.RMSNormalization(
            dtype=policy
        )
    return variants


def compile_step(layer, x, backward, jit_compile):
    if layer is None:  # the elementwise floor

        def floor(t):
            return t * tf.constant(2.0, t.dtype)

        return tf.function(floor, jit_compile=jit_compile)
    layer.build(x.shape)
    weights = layer.trainable_weights
    dy = tf.ones_like(layer(x))

    def forward(t):
        return layer(t)

    def forward_backward(t):
        with tf.GradientTape() as tape:
            tape.watch(t)
            y = layer(t)
        return tape.gradient(y, [t] + weights, output_gradients=dy)

    return tf.function(
        forward_backward if backward else forward, jit_compile=jit_compile
    )


def _sync(result):
    # Calls on CPU return after the kernels ran; reading one element makes
    # that explicit without copying the whole result.
    first = result[0] if isinstance(result, (list, tuple)) else result
    tf.reshape(first, [-1])[0].numpy()


def prepare(shape, dtype, backward, jit_compile, warmup):
    """name -> traced, warmed-up step, and the input they take."""
    policy = "mixed_bfloat16" if dtype == "bfloat16" else "float32"
    x = tf.constant(np.random.default_rng(0).standard_normal(shape), tf.float32)
    if dtype == "bfloat16":
        x = tf.cast(x, tf.bfloat16)
    steps = {
        name: compile_step(make(), x, backward, jit_compile)
        for name, make in make_variants(policy).items()
    }
    steps[FLOOR] = compile_step(None, x, False, jit_compile)
    for step in steps.values():
        for _ in range(warmup):
            _sync(step(x))
    return steps, x


def interleaved_medians(steps, x, rounds, clock):
    """Median seconds per variant over `rounds` interleaved calls."""
    names = list(steps)
    times = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            start = clock()
            _sync(steps[name](x))
            times[name].append(clock() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def measure_cell(shapes, dtype, backward, jit_compile, args, clock):
    """One (dtype, mode, pass) cell: per repetition, per shape, the median
    seconds of every variant."""
    prepared = [prepare(s, dtype, backward, jit_compile, args.warmup) for s in shapes]
    repetitions = []
    for _ in range(args.repeats):
        repetitions.append(
            [interleaved_medians(steps, x, args.rounds, clock) for steps, x in prepared]
        )
    return {
        "dtype": dtype,
        "mode": "xla" if jit_compile else "graph",
        "pass": "fwd+bwd" if backward else "fwd",
        "shapes": [list(s) for s in shapes],
        "repetitions": repetitions,
    }


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def cell_ratios(cell, name, reference):
    """Per repetition: geometric mean over shapes of time(name) / time(reference)."""
    return [
        geomean([medians[name] / medians[reference] for medians in repetition])
        for repetition in cell["repetitions"]
    ]


def _spread(ratios, unit="x"):
    return (
        f"{statistics.median(ratios):.2f}{unit} ({min(ratios):.2f}-{max(ratios):.2f})"
    )


def summarize(cells, repeats):
    """Two Markdown tables (ratio to the built-in, multiple of the floor)."""
    names = [n for n in cells[0]["repetitions"][0][0] if n != FLOOR]
    head = "| dtype | mode | pass | " + " | ".join(names) + " |"
    rule = "|---|---|---|" + "---|" * len(names)
    ratio_rows, floor_rows = [], []
    for cell in cells:
        key = f"| {cell['dtype']} | {cell['mode']} | {cell['pass']} | "
        ratio_rows.append(
            key
            + " | ".join(_spread(cell_ratios(cell, n, BASELINE)) for n in names)
            + " |"
        )
        floor_rows.append(
            key + " | ".join(_spread(cell_ratios(cell, n, FLOOR)) for n in names) + " |"
        )
    return "\n".join(
        [
            "Time as a multiple of Keras's built-in LayerNormalization (lower is "
            f"faster): geometric mean over the shapes, median of {repeats} "
            "repetitions (their min-max in brackets).",
            "",
            head,
            rule,
            *ratio_rows,
            "",
            "The same times as multiples of the elementwise floor `x * 2.0` "
            "(read once, write once).",
            "",
            head,
            rule,
            *floor_rows,
        ]
    )


def _cell_line(cell):
    names = [n for n in cell["repetitions"][0][0] if n not in (FLOOR, BASELINE)]
    parts = [f"{n} {_spread(cell_ratios(cell, n, BASELINE))}" for n in names]
    return f"{cell['dtype']} {cell['mode']} {cell['pass']}: " + "; ".join(parts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument(
        "--shapes",
        default=",".join("x".join(map(str, s)) for s in SHAPES),
        help="comma-separated shapes like 32x128x768",
    )
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall time (the default, and what to record), or this process's "
        "CPU time (it counts every core a kernel uses: multi-threaded kernels "
        "look slower than they are)",
    )
    add_report_arguments(parser, "the raw medians")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.rounds < 1:
        parser.error("--repeats and --rounds must be at least 1")
    shapes = [tuple(int(d) for d in s.split("x")) for s in args.shapes.split(",")]
    run = Run(args.clock, args.require_idle)
    print(run.header(), flush=True)
    print(
        f"{args.repeats} repetitions x median of {args.rounds} interleaved calls, "
        f"after {args.warmup} warm-up calls; shapes {args.shapes}",
        flush=True,
    )
    cells = []
    with tf.device(run.device):
        for dtype in args.dtypes.split(","):
            for jit_compile in (False, True):
                for backward in (False, True):
                    cells.append(
                        measure_cell(
                            shapes,
                            dtype,
                            backward,
                            jit_compile,
                            args,
                            CLOCKS[args.clock],
                        )
                    )
                    print(_cell_line(cells[-1]), flush=True)
    run.finish()
    method = (
        f"{args.repeats} repetitions x median of {args.rounds} interleaved calls; "
        f"shapes {args.shapes}"
    )
    tables = summarize(cells, args.repeats)
    run.report(method, tables, args.markdown, args.json, cells=cells)


if __name__ == "__main__":
    main()

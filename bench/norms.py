"""Benchmark tfnorm's norms against Keras's built-in layers.

Times forward and forward+backward (gradients w.r.t. x, gamma, beta) in graph
mode (`tf.function`) and under XLA (`jit_compile=True`), float32 and
bfloat16 (`mixed_bfloat16` layers), at the shapes of the layers issue. All
variants of one setting are interleaved in one run (the order rotates each
round) and the median of `--rounds` calls after warm-up is kept, so the
ratios survive a noisy shared machine; absolute times do not.

Each variant is printed as a ratio to Keras's built-in LayerNormalization and
as a multiple of an elementwise floor (`x * 2.0`, read once, write once)
measured in the same rounds.

    python bench/norms.py [--rounds 20] [--shapes 32x128x768,...] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import tfnorm  # noqa: E402
from tfnorm._keras import FLAVOUR, KERAS_VERSION, keras, tf  # noqa: E402

SHAPES = ((32, 128, 768), (8, 512, 1024), (256, 64, 256))
BASELINE = "keras LayerNormalization"
FLOOR = "floor x*2"


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
    }
    if hasattr(keras.layers, "RMSNormalization"):
        variants["keras RMSNormalization"] = lambda: keras.layers.RMSNormalization(
            dtype=policy
        )
    return variants


def compile_step(layer, x, backward, jit_compile):
    if layer is None:  # the elementwise floor

        def forward(t):
            return t * tf.constant(2.0, t.dtype)

        return tf.function(forward, jit_compile=jit_compile)
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


def measure(shape, dtype, backward, jit_compile, rounds, clock, warmup=3):
    policy = "mixed_bfloat16" if dtype == "bfloat16" else "float32"
    x = tf.constant(np.random.default_rng(0).standard_normal(shape), tf.float32)
    if dtype == "bfloat16":
        x = tf.cast(x, tf.bfloat16)
    factories = make_variants(policy)
    steps = {
        name: compile_step(make(), x, backward, jit_compile)
        for name, make in factories.items()
    }
    steps[FLOOR] = compile_step(None, x, False, jit_compile)
    names = list(steps)
    for name in names:
        for _ in range(warmup):
            _sync(steps[name](x))
    times = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            start = clock()
            _sync(steps[name](x))
            times[name].append(clock() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def _sync(result):
    # Eager calls on CPU return after the kernels ran; reading one element
    # makes that explicit without copying the whole result.
    first = result[0] if isinstance(result, (list, tuple)) else result
    tf.reshape(first, [-1])[0].numpy()


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--shapes",
        default=",".join("x".join(map(str, s)) for s in SHAPES),
        help="comma-separated shapes like 32x128x768",
    )
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall time, or this process's CPU time (steadier when other work "
        "shares the machine)",
    )
    parser.add_argument("--markdown", help="also write the tables to this file")
    parser.add_argument("--json", help="also write raw medians to this file")
    args = parser.parse_args(argv)
    shapes = [tuple(int(d) for d in s.split("x")) for s in args.shapes.split(",")]
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    header = (
        f"TensorFlow {tf.__version__}, Keras {KERAS_VERSION} ({FLAVOUR}), "
        f"{os.cpu_count()} CPUs, {args.clock} clock, median of {args.rounds} "
        "interleaved calls"
    )
    print(header, flush=True)
    raw = []
    for dtype in args.dtypes.split(","):
        for jit_compile in (False, True):
            for backward in (False, True):
                for shape in shapes:
                    medians = measure(
                        shape, dtype, backward, jit_compile, args.rounds, clock
                    )
                    raw.append(
                        {
                            "dtype": dtype,
                            "mode": "xla" if jit_compile else "graph",
                            "pass": "fwd+bwd" if backward else "fwd",
                            "shape": list(shape),
                            "seconds": medians,
                        }
                    )
                    print(_row(raw[-1]), flush=True)
    tables = summarize(raw)
    print("\n" + tables)
    if args.markdown:
        with open(args.markdown, "w") as handle:
            handle.write(f"{header}\n\n{tables}\n")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"header": header, "results": raw}, handle, indent=1)


def _row(entry):
    base = entry["seconds"][BASELINE]
    floor = entry["seconds"][FLOOR]
    nbytes = math.prod(entry["shape"]) * (2 if entry["dtype"] == "bfloat16" else 4)
    parts = [
        f"{name}: {t / base:.2f}x builtin, {t / floor:.1f}x floor, "
        f"{2 * nbytes / t / 1e9:.1f} GB/s"
        for name, t in entry["seconds"].items()
        if name != FLOOR
    ]
    shape = "x".join(map(str, entry["shape"]))
    return f"{entry['dtype']} {entry['mode']} {entry['pass']} {shape}: " + "; ".join(
        parts
    )


def summarize(raw):
    """Markdown tables: geometric means over shapes of ratio-to-builtin and
    multiple-of-floor, per dtype, mode and pass."""
    names = [n for n in raw[0]["seconds"] if n != FLOOR]
    lines = [
        "| dtype | mode | pass | " + " | ".join(names) + " |",
        "|---|---|---|" + "---|" * len(names),
    ]
    keys = []
    for entry in raw:
        key = (entry["dtype"], entry["mode"], entry["pass"])
        if key not in keys:
            keys.append(key)
    for key in keys:
        group = [e for e in raw if (e["dtype"], e["mode"], e["pass"]) == key]
        cells = []
        for name in names:
            ratio = geomean(
                [e["seconds"][name] / e["seconds"][BASELINE] for e in group]
            )
            floor = geomean([e["seconds"][name] / e["seconds"][FLOOR] for e in group])
            cells.append(f"{ratio:.2f}x ({floor:.1f}x floor)")
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells) + " |")
    return (
        "Geometric mean over shapes; time as a multiple of Keras's built-in "
        "LayerNormalization (lower is faster), in brackets as a multiple of "
        "the elementwise floor `x * 2.0`.\n\n" + "\n".join(lines)
    )


if __name__ == "__main__":
    main()

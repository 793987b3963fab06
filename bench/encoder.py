"""Training-step throughput of tfnorm's encoder against Keras's own norms.

A 4-layer `tfnorm.build_encoder` (d_model 256, 4 heads, dff 1024, sequence
128, batch 32, GELU, LayerNorm epsilon 1e-5, dropout 0.1 on the attention
probabilities and before each residual add, none inside the FFN), Pre-LN and
Post-LN, against a reference built from Keras's own layers:

* Keras 3 (`keras3`, `tf_keras` needs none): a stack of 4 keras-hub
  `TransformerEncoder` blocks with the same sizes, norm position
  (`normalize_first`), dropout sites and epsilon; tfnorm's Pre-LN final norm
  is left out (`final_norm=False`) because keras-hub's stack has none.
* Keras 2 (TensorFlow 2.9's `tf29` runtime, or without keras-hub): the same
  `build_encoder` with `norm=keras.layers.LayerNormalization`, so only the
  norm layers differ. (At epsilon 1e-5 Keras 2.9's layer runs its unfused
  path: its fused kernel only takes epsilon >= 1.001e-5.)

A third and fourth variant measure what the norms themselves cost inside the
step: the same `build_encoder` with Keras's LayerNormalization in every norm
(`keras-norm`, the reference itself under Keras 2) and with an identity in
every norm (`identity`, a norm that returns its input). A norm's cost is its
step time minus the identity's in the same round, the median over every
round of every repetition; the second table gives tfnorm's cost as a
fraction of Keras's (lower is better) and both costs as shares of the
identity step.

Both get a padding mask of ones. One training step = forward
(training=True), mean squared error against a random target, backward, Adam
update, inside one `tf.function` (graph mode, and with `--xla` also
`jit_compile=True`). The variants run interleaved (order alternating each
round); the ratio of their median step times over `--rounds` steps is one
repetition, and `--repeats` repetitions (default 3) give the median ratio
and its spread. Wall clock; the load average is checked first as in
`bench/norms.py` (`--require-idle` refuses a busy machine). A norm costs a
few percent of a step, the size of a step's spread here: with 16 rounds (48
per cell) two idle runs per runtime agreed within 15% on 7 of the cost
table's 8 cells (both runtimes), with 8 rounds on 2; Keras 2.9's Post-LN
graph-mode cell did not agree even at 67 rounds (0.45-0.77 over five idle
runs, see docs/benchmarks.md).

    python bench/encoder.py [--rounds 16] [--repeats 3] [--positions pre,post]
        [--xla] [--reference keras-hub|keras-norm] [--require-idle]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import tfnorm  # noqa: E402
from bench.machine import Run, add_report_arguments  # noqa: E402
from tfnorm._keras import IS_KERAS_3, keras, tf  # noqa: E402

LAYERS, D_MODEL, HEADS, DFF, SEQ, BATCH = 4, 256, 4, 1024, 128, 32
DROPOUT = 0.1
EPSILON = 1e-5


@keras.utils.register_keras_serializable(package="bench")
class IdentityNorm(tfnorm.layers.BaseNormalization):
    """A norm that returns its input: the step without any norm's cost."""

    has_row_statistic = False

    def __init__(self, axis=-1, **kwargs):
        super().__init__(axis=axis, epsilon=None, **kwargs)

    def _normalize(self, x, positive):
        return x


def tfnorm_encoder(position, norm="layer", name="tfnorm_encoder", epsilon=EPSILON):
    return tfnorm.build_encoder(
        LAYERS,
        D_MODEL,
        HEADS,
        DFF,
        dropout_rate=DROPOUT,
        ffn_dropout=0.0,
        norm=norm,
        norm_position=position,
        epsilon=epsilon,
        activation="gelu",
        final_norm=False,
        seq_len=SEQ,
        name=name,
    )


def keras_norm_encoder(position):
    """The same encoder with Keras's own LayerNormalization in every norm."""
    return tfnorm_encoder(position, keras.layers.LayerNormalization, "keras_encoder")


def identity_norm_encoder(position):
    """The same encoder with an identity in place of every norm."""
    return tfnorm_encoder(position, IdentityNorm, "identity_encoder", epsilon=None)


def keras_hub_encoder(position):
    import keras_hub

    sequence = keras.Input(shape=(SEQ, D_MODEL))
    padding_mask = keras.Input(shape=(SEQ,), dtype="int32")
    x = sequence
    for index in range(LAYERS):
        x = keras_hub.layers.TransformerEncoder(
            intermediate_dim=DFF,
            num_heads=HEADS,
            dropout=DROPOUT,
            activation="gelu",
            layer_norm_epsilon=EPSILON,
            normalize_first=position == "pre",
            name=f"block_{index}",
        )(x, padding_mask=padding_mask)
    return keras.Model([sequence, padding_mask], x, name="keras_hub_encoder")


VARIANTS = {
    # name: (model factory, padding-mask dtype)
    "tfnorm": (tfnorm_encoder, tf.float32),
    "keras-hub": (keras_hub_encoder, tf.int32),
    "keras-norm": (keras_norm_encoder, tf.float32),
    "identity": (identity_norm_encoder, tf.float32),
}
REFERENCES = ("keras-hub", "keras-norm")


def default_reference():
    if not IS_KERAS_3:
        return "keras-norm"
    try:
        import keras_hub  # noqa: F401
    except ImportError:
        return "keras-norm"
    return "keras-hub"


def training_step(model, mask_dtype, jit_compile):
    """One training step of `model` on a fixed random batch, as a
    `tf.function`: forward, MSE, backward, Adam update."""
    optimizer = keras.optimizers.Adam(1e-4)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((BATCH, SEQ, D_MODEL)), tf.float32)
    target = tf.constant(rng.standard_normal((BATCH, SEQ, D_MODEL)), tf.float32)
    mask = tf.ones((BATCH, SEQ), mask_dtype)
    variables = model.trainable_variables

    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape:
            out = model([x, mask], training=True)
            loss = tf.reduce_mean(tf.square(out - target))
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables))
        return loss

    return step


def make_step(model, mask_dtype, jit_compile):
    """`training_step`, returning its wall-clock seconds per call."""
    step = training_step(model, mask_dtype, jit_compile)

    def run():
        start = time.perf_counter()
        float(step())
        return time.perf_counter() - start

    return run


def measure(position, jit_compile, names, args):
    """Per repetition, every variant's step seconds, round by round."""
    keras.utils.set_random_seed(0)
    steps = {}
    for name in names:
        make_model, mask_dtype = VARIANTS[name]
        steps[name] = make_step(make_model(position), mask_dtype, jit_compile)
    order = list(steps)
    for _ in range(args.warmup):
        for name in order:
            steps[name]()
    repetitions = []
    for _ in range(args.repeats):
        times = {name: [] for name in steps}
        for round_index in range(args.rounds):
            for name in order if round_index % 2 == 0 else reversed(order):
                times[name].append(steps[name]())
        repetitions.append(times)
    return repetitions


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--positions", default="pre,post")
    parser.add_argument("--xla", action="store_true", help="also time jit_compile")
    parser.add_argument(
        "--reference",
        choices=REFERENCES,
        help="what tfnorm's encoder is compared with: keras-hub's blocks "
        "(Keras 3, the default there) or the same encoder with Keras's "
        "LayerNormalization (the default elsewhere)",
    )
    add_report_arguments(parser, "every step time")
    args = parser.parse_args(argv)
    reference = args.reference or default_reference()
    if reference == "keras-hub" and not IS_KERAS_3:
        parser.error("keras-hub needs Keras 3; use --reference keras-norm")
    if args.repeats < 1 or args.rounds < 1:
        parser.error("--repeats and --rounds must be at least 1")

    run = Run("wall", args.require_idle)
    print(run.header(), flush=True)
    method = (
        f"{LAYERS} layers, d_model {D_MODEL}, {HEADS} heads, dff {DFF}, seq "
        f"{SEQ}, batch {BATCH}; tfnorm vs {reference}; {args.repeats} "
        f"repetitions x median of {args.rounds} interleaved steps after "
        f"{args.warmup} warm-up steps"
    )
    print(method, flush=True)
    modes = [("graph", False)] + ([("XLA", True)] if args.xla else [])
    names = list(dict.fromkeys(["tfnorm", reference, "keras-norm", "identity"]))
    rows, cost_rows, raw = [], [], []
    with tf.device(run.device):
        for position in args.positions.split(","):
            for mode, jit_compile in modes:
                repetitions = measure(position, jit_compile, names, args)
                rows.append(_speed_row(position, mode, repetitions, reference))
                cost_rows.append(_cost_row(position, mode, repetitions))
                print(rows[-1], "\n", cost_rows[-1], flush=True)
                raw.append({"position": position, "mode": mode, "seconds": repetitions})
    run.finish()
    table = "\n".join(
        [
            f"| position | mode | tfnorm tokens/s | {reference} tokens/s | "
            "tfnorm speed-up (min-max) |",
            "| --- | --- | ---: | ---: | ---: |",
            *rows,
            "",
            "What the norms add to the step (step time minus the identity "
            "step's in the same round, median over every round), as a share of "
            "the identity step, and tfnorm's cost as a fraction of Keras "
            "LayerNormalization's (min-max of the repetitions' fractions in "
            "brackets; lower is better):",
            "",
            "| position | mode | tfnorm norms' cost | Keras norms' cost | "
            "tfnorm cost / Keras cost |",
            "| --- | --- | ---: | ---: | ---: |",
            *cost_rows,
        ]
    )
    run.report(method, table, args.markdown, args.json, results=raw)


def _spread(values, form):
    return (
        f"{form(statistics.median(values))} ({form(min(values))}-{form(max(values))})"
    )


def _speed_row(position, mode, repetitions, reference):
    tokens = BATCH * SEQ
    medians = [{n: statistics.median(v) for n, v in r.items()} for r in repetitions]
    ratios = [m[reference] / m["tfnorm"] for m in medians]
    ours = statistics.median(tokens / m["tfnorm"] for m in medians)
    theirs = statistics.median(tokens / m[reference] for m in medians)
    return (
        f"| {position} | {mode} | {ours:,.0f} | {theirs:,.0f} | "
        f"{_spread(ratios, lambda v: f'{v:.2f}x')} |"
    )


def norm_cost(times, name):
    """The median, over rounds, of `name`'s step time less the identity
    step's in the same round: steps timed side by side share the machine's
    drift, which a difference of two medians would not cancel."""
    return statistics.median(
        ours - bare for ours, bare in zip(times[name], times["identity"])
    )


def _cost_row(position, mode, repetitions):
    pooled = {
        name: [t for r in repetitions for t in r[name]]
        for name in ("tfnorm", "keras-norm", "identity")
    }
    bare = statistics.median(pooled["identity"])
    ours, theirs = norm_cost(pooled, "tfnorm"), norm_cost(pooled, "keras-norm")
    fractions = [
        norm_cost(r, "tfnorm") / norm_cost(r, "keras-norm") for r in repetitions
    ]
    return (
        f"| {position} | {mode} | {ours / bare:.1%} | {theirs / bare:.1%} | "
        f"{ours / theirs:.2f} ({min(fractions):.2f}-{max(fractions):.2f}) |"
    )


if __name__ == "__main__":
    main()

"""Training-step throughput: tfnorm's encoder against keras-hub's.

A 4-layer `tfnorm.build_encoder` and a stack of 4 `keras_hub.layers.
TransformerEncoder` with the same sizes (d_model 256, 4 heads, dff 1024,
sequence 128, batch 32), the same norm position (Pre-LN: keras-hub's
`normalize_first=True`; Post-LN: `False`), GELU, LayerNorm epsilon 1e-5 and
the same dropout sites (0.1 on the attention probabilities and before each
residual add, none inside the FFN, as keras-hub has it). tfnorm's Pre-LN
final norm is left out (`final_norm=False`) because keras-hub's stack has
none. Both get a padding mask of ones, so the masking work is the same.

One training step = forward (training=True), mean squared error against a
random target, backward, Adam update, inside one `tf.function` (graph mode,
and with `--xla` also `jit_compile=True`). The variants run interleaved
(order alternating each round) and the median step time of `--rounds` steps
after warm-up is kept, so the ratio survives a shared machine.

Keras 3 runtime only (keras-hub needs Keras 3); install with
`pip install -e ".[bench]"`.

    python bench/encoder.py [--rounds 10] [--positions pre,post] [--xla]
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
from tfnorm._keras import FLAVOUR, IS_KERAS_3, KERAS_VERSION, keras, tf  # noqa: E402

LAYERS, D_MODEL, HEADS, DFF, SEQ, BATCH = 4, 256, 4, 1024, 128, 32
DROPOUT = 0.1


def tfnorm_encoder(position):
    return tfnorm.build_encoder(
        LAYERS,
        D_MODEL,
        HEADS,
        DFF,
        dropout_rate=DROPOUT,
        ffn_dropout=0.0,
        norm_position=position,
        epsilon=1e-5,
        activation="gelu",
        final_norm=False,
        seq_len=SEQ,
        name="tfnorm_encoder",
    )


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
            layer_norm_epsilon=1e-5,
            normalize_first=position == "pre",
            name=f"block_{index}",
        )(x, padding_mask=padding_mask)
    return keras.Model([sequence, padding_mask], x, name="keras_hub_encoder")


def make_step(model, mask_dtype, jit_compile):
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

    def run():
        start = time.perf_counter()
        float(step())
        return time.perf_counter() - start

    return run


def measure(position, jit_compile, rounds, warmup):
    keras.utils.set_random_seed(0)
    steps = {
        "tfnorm": make_step(tfnorm_encoder(position), tf.float32, jit_compile),
        "keras-hub": make_step(keras_hub_encoder(position), tf.int32, jit_compile),
    }
    times = {name: [] for name in steps}
    order = list(steps)
    for round_index in range(warmup + rounds):
        for name in order if round_index % 2 == 0 else reversed(order):
            elapsed = steps[name]()
            if round_index >= warmup:
                times[name].append(elapsed)
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--positions", default="pre,post")
    parser.add_argument("--xla", action="store_true", help="also time jit_compile")
    args = parser.parse_args(argv)
    if not IS_KERAS_3:
        sys.exit(f"bench/encoder.py needs Keras 3 (keras-hub); this is {FLAVOUR}.")

    print(
        f"TensorFlow {tf.__version__}, Keras {KERAS_VERSION}; {LAYERS} layers, "
        f"d_model {D_MODEL}, {HEADS} heads, dff {DFF}, seq {SEQ}, batch {BATCH}; "
        f"median of {args.rounds} interleaved steps"
    )
    print("| position | mode | tfnorm tokens/s | keras-hub tokens/s | ratio |")
    print("| --- | --- | ---: | ---: | ---: |")
    modes = [("graph", False)] + ([("XLA", True)] if args.xla else [])
    for position in args.positions.split(","):
        for mode, jit_compile in modes:
            medians = measure(position, jit_compile, args.rounds, args.warmup)
            tokens = BATCH * SEQ
            ours, theirs = tokens / medians["tfnorm"], tokens / medians["keras-hub"]
            print(
                f"| {position} | {mode} | {ours:,.0f} | {theirs:,.0f} | "
                f"{ours / theirs:.2f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()

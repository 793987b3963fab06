"""Epoch-time overhead of tfnorm's monitoring callbacks.

Trains the same `build_classifier` model for one epoch at a time, with and
without the three callbacks (`NormHistogramCallback` recording outputs and
inputs, `NormHealthMonitor` with probe data, `GradientNormCallback`), all at
`--every-n-steps` (default 100). The two variants are interleaved, their
order alternating each round, after one warm-up epoch each (which pays for
tracing); the ratio of median epoch times is printed. On a shared, noisy
machine only the ratio is meaningful.

    python bench/callbacks.py [--rounds 5] [--steps 200] [--every-n-steps 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import tfnorm  # noqa: E402
from tfnorm._keras import FLAVOUR, KERAS_VERSION, keras, tf  # noqa: E402

VOCAB, MAX_LEN, CLASSES, BATCH = 1000, 32, 4, 16


def make_model():
    model = tfnorm.build_classifier(
        VOCAB, MAX_LEN, CLASSES, num_layers=2, d_model=32, num_heads=4, dff=128
    )
    model.compile(
        keras.optimizers.Adam(1e-3),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def make_data(steps, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(1, VOCAB, size=(steps * BATCH, MAX_LEN)).astype("int32")
    x[:, MAX_LEN * 3 // 4 :] = 0  # padding
    y = rng.integers(0, CLASSES, size=(steps * BATCH,)).astype("int32")
    return x, y


def make_callbacks(log_dir, x, y, every_n_steps):
    probe = (x[:BATCH], y[:BATCH])
    return [
        tfnorm.callbacks.NormHistogramCallback(
            os.path.join(log_dir, "norms"),
            probe[0],
            every_n_steps=every_n_steps,
            record=("outputs", "inputs"),
        ),
        tfnorm.callbacks.NormHealthMonitor(probe[0], every_n_steps=every_n_steps),
        tfnorm.callbacks.GradientNormCallback(
            os.path.join(log_dir, "grads"), probe, every_n_steps=every_n_steps
        ),
    ]


def epoch_time(model, x, y, callbacks):
    start = time.perf_counter()
    model.fit(
        x, y, batch_size=BATCH, epochs=1, shuffle=False, callbacks=callbacks, verbose=0
    )
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=200, help="steps per epoch")
    parser.add_argument("--every-n-steps", type=int, default=100)
    args = parser.parse_args(argv)

    x, y = make_data(args.steps)
    with tempfile.TemporaryDirectory() as log_dir:
        keras.utils.set_random_seed(0)
        plain = make_model()
        keras.utils.set_random_seed(0)
        probed = make_model()
        callbacks = make_callbacks(log_dir, x, y, args.every_n_steps)
        # Warm-up: traces the train step, and the probes (logged at least once).
        epoch_time(plain, x, y, [])
        epoch_time(probed, x, y, callbacks)
        times = {"without": [], "with": []}
        for round_index in range(args.rounds):
            order = ["without", "with"] if round_index % 2 == 0 else ["with", "without"]
            for variant in order:
                if variant == "with":
                    times["with"].append(epoch_time(probed, x, y, callbacks))
                else:
                    times["without"].append(epoch_time(plain, x, y, []))
                print(
                    f"round {round_index}: {variant} {times[variant][-1]:.3f} s",
                    flush=True,
                )
        # The epoch ratio is noisy on a shared machine; the probes' own cost,
        # timed directly, bounds what they add per epoch.
        probe_times = []
        for callback in callbacks:
            calls = []
            for repeat in range(5):
                start = time.perf_counter()
                callback._periodic(10**6 + repeat)
                calls.append(time.perf_counter() - start)
            probe_times.append(statistics.median(calls))
    without = statistics.median(times["without"])
    with_callbacks = statistics.median(times["with"])
    print(
        f"TensorFlow {tf.__version__}, Keras {KERAS_VERSION} ({FLAVOUR}); "
        f"{args.steps} steps/epoch, every_n_steps={args.every_n_steps}, "
        f"{args.rounds} rounds"
    )
    for variant, median in (("without", without), ("with", with_callbacks)):
        rounded = [round(t, 3) for t in times[variant]]
        print(f"median epoch {variant} callbacks: {median:.3f} s  {rounded}")
    print(f"overhead ratio (with / without): {with_callbacks / without:.3f}")
    per_epoch = sum(probe_times) * args.steps / args.every_n_steps
    names = ", ".join(
        f"{type(c).__name__} {t * 1000:.1f} ms" for c, t in zip(callbacks, probe_times)
    )
    print(f"one probe each: {names}")
    print(
        f"probe time per epoch: {per_epoch:.3f} s = "
        f"{per_epoch / without:.1%} of an epoch without callbacks"
    )


if __name__ == "__main__":
    main()

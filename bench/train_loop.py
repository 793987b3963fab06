"""The step loop of `tfnorm train --model-fn` against the same model's `model.fit`.

The model is `examples/keras_transformer_classifier.py` (the keras.io text
classifier with Keras's own norms, compiled) on its NumPy data, batch 32.
Each repetition times, interleaved (order alternating):

* `fit`: `model.fit(x, y, batch_size=32, epochs=1, steps_per_epoch=STEPS + 1,
  shuffle=True, verbose=0)`, timed by a callback from the end of the first
  step to the end of the last (without the set-up each `fit` call pays
  once);
* `tfnorm train`: `STEPS` steps of the run's own step path for the same
  model and data (`tfnorm.training.workloads.own_model`: the seeded batch order, the
  model's `train_step`, the per-step NaN check of the loss, progress lines
  every `--log-every` steps), through `run_loop` with the NaN guard and the
  progress action as `train` orders them; no checkpoint falls inside.

Each side builds its model once and warms up (tracing) first. The ratio is
tfnorm's time per step over fit's; `--repeats` repetitions give its median
and spread. Wall clock; the load is checked as in `bench/norms.py`.

    python bench/train_loop.py [--steps 200] [--repeats 21] [--require-idle]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import numpy as np  # noqa: E402

from bench.machine import Run, add_report_arguments  # noqa: E402
from tfnorm.training.config.train_config import TrainConfig  # noqa: E402
from tfnorm.training.loop import actions, reporting  # noqa: E402
from tfnorm.training.loop.driver import run_loop  # noqa: E402
from tfnorm.training.rundir.progress_log import ProgressLog  # noqa: E402
from tfnorm.training.workloads.own_model import OwnModelWorkload  # noqa: E402

EXAMPLE = os.path.join(REPO, "examples", "keras_transformer_classifier.py")
BATCH = 32


def tfnorm_side(steps, log_every, logdir):
    """A function timing `steps` steps of the run's step path."""
    config = TrainConfig(
        model_fn=f"{EXAMPLE}:build_model",
        data_fn=f"{EXAMPLE}:load_data",
        batch_size=BATCH,
        log_every=log_every,
        logdir=logdir,
    ).resolve()
    log = ProgressLog(io.StringIO())
    workload = OwnModelWorkload(config, log)
    workload.load(None, False)
    total = 10**9
    setup = workload.build(total)
    step_fn = workload.step_fn(setup)
    cadence = actions.Cadence(10**6, total, 10**6)
    guard = actions.NanGuard(setup.model, cadence, log, lambda: None)
    progress = reporting.Progress(
        log, logdir=None, cadence=cadence, epochs=1, batch_size=BATCH,
        log_every=log_every, learning_rate=setup.learning_rate,
        reset=workload.reset_window(setup),
    )  # fmt: skip
    done = [0]

    def timed():
        start = time.perf_counter()
        run_loop(step_fn, done[0], done[0] + steps, [guard, progress])
        done[0] += steps
        return (time.perf_counter() - start) / steps

    return timed


def fit_side(steps):
    """A function timing `steps` steps of one `fit` epoch on the same data."""
    sys.path.insert(0, os.path.dirname(EXAMPLE))
    import keras_transformer_classifier as example

    from tfnorm._keras import keras

    model = example.build_model()
    (x, y), _ = example.load_data()
    # `fit` stops an epoch when the arrays run out: enough for steps + 1.
    copies = -(-(steps + 1) * BATCH // len(x))
    x, y = np.concatenate([x] * copies), np.concatenate([y] * copies)

    class StepClock(keras.callbacks.Callback):
        """Times from the end of the epoch's first step to the end of its
        last: the steps alone, without what `fit` pays once per call (its
        data adapter, callbacks, the epoch's first batch)."""

        def on_train_batch_end(self, batch, logs=None):
            if batch == 0:
                self.start = time.perf_counter()
            elif batch == steps:
                self.seconds = time.perf_counter() - self.start

    def timed():
        clock = StepClock()
        model.fit(
            x, y, batch_size=BATCH, epochs=1, steps_per_epoch=steps + 1,
            shuffle=True, verbose=0, callbacks=[clock],
        )  # fmt: skip
        return clock.seconds / steps

    return timed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="steps per timing")
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--log-every", type=int, default=10)
    add_report_arguments(parser, "the raw times")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.repeats < 1:
        parser.error("--steps and --repeats must be at least 1")
    run = Run("wall", args.require_idle)
    print(run.header(), flush=True)
    import tempfile

    with tempfile.TemporaryDirectory() as logdir:
        sides = {
            "tfnorm": tfnorm_side(args.steps, args.log_every, logdir),
            "fit": fit_side(args.steps),
        }
        for timed in sides.values():  # tracing, first-epoch costs
            timed()
        times = {name: [] for name in sides}
        for repeat in range(args.repeats):
            order = list(sides) if repeat % 2 == 0 else list(sides)[::-1]
            for name in order:
                times[name].append(sides[name]())
    run.finish()
    ratios = [ours / theirs for ours, theirs in zip(times["tfnorm"], times["fit"])]
    method = (
        f"{EXAMPLE.split(os.sep)[-1]} (compiled, batch {BATCH}); {args.repeats} "
        f"interleaved repetitions of {args.steps} steps; progress every "
        f"{args.log_every} steps"
    )
    table = "\n".join(
        [
            "| step path | ms/step (median) | ÷ fit (median, min-max) |",
            "| --- | ---: | ---: |",
            f"| model.fit | {1000 * statistics.median(times['fit']):.2f} | 1.00 |",
            f"| tfnorm train | {1000 * statistics.median(times['tfnorm']):.2f} | "
            f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) |",
        ]
    )
    run.report(method, table, args.markdown, args.json, seconds_per_step=times)


if __name__ == "__main__":
    main()

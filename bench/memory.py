"""The memory an encoder training step takes, with tfnorm's norms and with
Keras's.

The encoder of `bench/encoder.py` (4 layers, d_model 256, 4 heads, dff 1024,
sequence 128, batch 32, dropout 0.1), Pre-LN and Post-LN, in graph mode and
under XLA, with three kinds of norm: tfnorm's LayerNormalization, Keras's
LayerNormalization, and an identity. One training step (forward, MSE,
backward, Adam update in one `tf.function`) runs twice first (tracing, the
optimizer's slots); then TensorFlow's allocator statistics of the device
(`tf.config.experimental.get_memory_info`) are reset and one more step runs.
The step's memory is its peak less what was allocated before it (weights,
optimizer slots, inputs): the activations kept for the backward pass plus
what the step holds beside them at its peak. What the norms take is that
figure less the identity encoder's; the last column is tfnorm's norms' share
over Keras's (at most 1.00 is the target).

Graph mode runs its ops one at a time here (inter-op parallelism 1), so the
peak is the program's rather than the scheduler's; XLA plans its buffers
ahead, so its peak is fixed at compile time. Each figure is taken three
times (three steps) and must repeat: the largest is reported. Allocations
made outside TensorFlow's allocator (oneDNN's scratch space) are not
counted.

    python bench/memory.py [--positions pre,post] [--markdown F] [--json F]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.encoder import VARIANTS, training_step  # noqa: E402
from bench.machine import Run, short_device_name  # noqa: E402
from tfnorm._keras import keras, tf  # noqa: E402

NORMS = ("tfnorm", "keras-norm", "identity")
MODES = (("graph", False), ("XLA", True))
MIB = 2.0**20


def step_memory(name, position, jit_compile, memory_device, samples):
    """The bytes each of `samples` training steps takes above what was
    allocated before it, on `memory_device` ("CPU:0")."""
    make_model, mask_dtype = VARIANTS[name]
    keras.utils.set_random_seed(0)
    step = training_step(make_model(position), mask_dtype, jit_compile)
    for _ in range(2):
        float(step())
    taken = []
    for _ in range(samples):
        gc.collect()
        before = tf.config.experimental.get_memory_info(memory_device)["current"]
        tf.config.experimental.reset_memory_stats(memory_device)
        float(step())
        taken.append(
            tf.config.experimental.get_memory_info(memory_device)["peak"] - before
        )
    return taken


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", default="pre,post")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--json", help="also write every sample to this file")
    args = parser.parse_args(argv)
    if args.samples < 1:
        parser.error("--samples must be at least 1")
    try:  # possible only before TensorFlow's runtime starts (Run starts it)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:  # started already: called from a test
        print("bench: inter-op parallelism already set; graph-mode peaks may vary")
    # Memory does not depend on other work: no idle check is needed.
    run = Run("allocator", require_idle=False)
    print(run.header(), flush=True)
    rows, raw = [], []
    memory_device = short_device_name(run.device)
    with tf.device(run.device):
        for position in args.positions.split(","):
            for mode, jit_compile in MODES:
                taken = {
                    name: step_memory(
                        name, position, jit_compile, memory_device, args.samples
                    )
                    for name in NORMS
                }
                raw.append({"position": position, "mode": mode, "bytes": taken})
                rows.append(_row(position, mode, taken))
                print(rows[-1], flush=True)
    run.finish()
    method = (
        "peak of one training step less the memory allocated before it, "
        f"largest of {args.samples} steps (MiB)"
    )
    table = "\n".join(
        [
            "| position | mode | tfnorm step | Keras LN step | identity step | "
            "tfnorm norms | Keras norms | tfnorm / Keras norms |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
            *rows,
        ]
    )
    run.report(method, table, args.markdown, args.json, results=raw)


def _row(position, mode, taken):
    step = {name: max(values) / MIB for name, values in taken.items()}
    spread = max(max(v) - min(v) for v in taken.values()) / MIB
    ours = step["tfnorm"] - step["identity"]
    theirs = step["keras-norm"] - step["identity"]
    # Keras's norms can take nothing above the identity's step (XLA may keep
    # their input for other users anyway): then no share is given.
    share = f"{ours / theirs:.2f}" if theirs > 0.05 else "-"
    note = "" if spread < 0.01 else f" (samples {spread:.1f} MiB apart)"
    return (
        f"| {position} | {mode} | {step['tfnorm']:.1f} | {step['keras-norm']:.1f} | "
        f"{step['identity']:.1f} | {ours:.1f} | {theirs:.1f} | {share}{note} |"
    )


if __name__ == "__main__":
    main()

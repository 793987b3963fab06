"""What a token's output depends on besides its own past, per norm: claims 8 and 9 of docs/claims.md.

No timing: a measure of information flow. A small causal decoder
(`tfnorm.build_decoder`, Pre-LN, the norm of every block and the final one
swapped) is run on a fixed batch of byte tokens, then on the same batch
with one thing changed, and the largest change of the logits a causal,
per-example model must not show is reported, relative to the logits'
spread (standard deviation over the whole batch):

- **future**: token t of sequence 0 replaced, for every t; the change of
  sequence 0's logits at positions before t. A causal decoder's output at
  position s may depend on tokens 0..s only.
- **batch**: every other sequence of the batch replaced; the change of
  sequence 0's logits. An example's output should not depend on what it
  is batched with.
- **halves**: the batch run as two halves on one device; the change of
  every logit.
- **replicas**: the same global batch split over two replicas of a
  `tf.distribute.MirroredStrategy` (two logical CPU devices) against one
  device; the change of every logit. Data parallelism should not change
  what the model computes.

Each in training mode (`training=True`: what the training step's loss
sees) and in inference mode. The norms: tfnorm's `LayerNormalization` and
`RMSNorm` (statistics over each token's own features), Keras's
`BatchNormalization` (statistics over the batch and the positions, per
feature; moving averages at inference) and its synchronised variant
(statistics over the global batch across replicas). A change of 0 means
the outputs were bit-identical; float32 round-off would show as ~1e-7.

    python bench/norm_mixing.py [--markdown FILE] [--json FILE]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

#: The decoder measured: small enough to run in seconds, deep enough that a
#: change passes through several norms.
SIZES = {
    "num_layers": 2,
    "d_model": 32,
    "num_heads": 4,
    "dff": 64,
    "vocab_size": 257,
    "max_len": 16,
}
BATCH = 8
NORMS = ("layer", "rms", "batch", "batch_synchronized")
MEASURES = ("future", "batch", "halves", "replicas")


def use_two_cpu_devices():
    """Splits the CPU into two logical devices for the replicas measure
    (possible only before TensorFlow starts running ops); whether two are
    there."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )
    except RuntimeError:
        pass  # already started: the devices are what they are
    return len(tf.config.list_logical_devices("CPU")) >= 2


@functools.lru_cache(maxsize=None)
def synchronized_batch_norm_class():
    """tfnorm's BatchNorm control with Keras's synchronised batch norm inside
    (statistics over the global batch across replicas)."""
    from tfnorm._keras import build_sublayer, keras, plain_axis
    from tfnorm.experiments.controls import MaskedBatchNorm
    from tfnorm.layers.base_normalization import BaseNormalization

    @keras.utils.register_keras_serializable(package="tfnorm_bench")
    class SynchronizedBatchNorm(MaskedBatchNorm):
        def build(self, input_shape):
            # MaskedBatchNorm's build with the synchronised layer inside.
            BaseNormalization.build(self, input_shape)
            options = {
                "axis": plain_axis(self.axis),
                "momentum": self.momentum,
                "epsilon": self.epsilon,
                "dtype": self.dtype_policy,
                "name": "batch_norm",
            }
            try:  # Keras 3, tf_keras
                layer = keras.layers.BatchNormalization(synchronized=True, **options)
            except TypeError:  # Keras 2.9
                layer = keras.layers.experimental.SyncBatchNormalization(**options)
            self.batch_norm = layer
            build_sublayer(self.batch_norm, input_shape)

    return SynchronizedBatchNorm


def norm_spec(norm):
    """What `build_decoder` takes as `norm` for one of `NORMS`."""
    if norm in ("layer", "rms"):
        return norm
    if norm == "batch":
        from tfnorm.experiments.controls import MaskedBatchNorm

        return MaskedBatchNorm
    return synchronized_batch_norm_class()


def build(norm, seed):
    import tfnorm
    from tfnorm import _keras

    _keras.keras.utils.set_random_seed(seed)
    return tfnorm.build_decoder(
        **SIZES, preset="gpt2", norm=norm_spec(norm), dropout_rate=0.0
    )


def relative_change(before, after, scale):
    return float(np.max(np.abs(np.asarray(after) - np.asarray(before))) / scale)


def future_change(model, ids, base, training):
    """Largest change of sequence 0's logits before position t when its
    token t changes, over every t (`base`: the logits of `ids`)."""
    scale = float(base.std())
    worst = 0.0
    for t in range(1, ids.shape[1]):
        changed = ids.copy()
        changed[0, t] = (changed[0, t] + 1) % SIZES["vocab_size"]
        out = model(changed, training=training).numpy()
        worst = max(worst, relative_change(base[0, :t], out[0, :t], scale))
    return worst


def batch_change(model, ids, base, others, training):
    """Change of sequence 0's logits when every other sequence changes."""
    changed = ids.copy()
    changed[1:] = others[1:]
    out = model(changed, training=training).numpy()
    return relative_change(base[0], out[0], float(base.std()))


def split_change(model, ids, base, training):
    """Change of the logits when the batch runs as two halves, one after
    the other, on one device: what two replicas do to statistics taken
    over the batch, plus the round-off of smaller matrix products."""
    half = len(ids) // 2
    out = np.concatenate(
        [model(ids[:half], training=training), model(ids[half:], training=training)]
    )
    return relative_change(base, out, float(base.std()))


@functools.lru_cache(maxsize=None)
def two_replicas():
    """One strategy for the process: the collectives of a second one would
    reuse the first's instance keys."""
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def replica_change(model, norm, seed, ids, base, training):
    """Change of the logits when the batch is split over two replicas of a
    copy of `model` (built as `build(norm, seed)`)."""
    strategy = two_replicas()
    with strategy.scope():
        mirrored = build(norm, seed)
    mirrored.set_weights(model.get_weights())
    dataset = tf.data.Dataset.from_tensor_slices(ids).batch(len(ids))
    batch = next(iter(strategy.experimental_distribute_dataset(dataset)))

    # In a function, as a training step runs it: eager replicas may issue
    # the synchronised norm's collectives in different orders.
    @tf.function
    def forward(batch):
        outputs = strategy.run(lambda x: mirrored(x, training=training), args=(batch,))
        return strategy.gather(outputs, axis=0)

    out = forward(batch).numpy()
    return relative_change(base, out, float(base.std()))


def measure(norms=None, seed=0, replicas=True, modes=(True, False)):
    """Every measure for every norm, in training (True) and inference
    (False) mode: rows of {norm, mode, future, batch, halves, replicas}
    (replicas None when two devices are not available)."""
    norms = NORMS if norms is None else norms
    rng = np.random.default_rng(seed)
    shape = (BATCH, SIZES["max_len"])
    ids = rng.integers(0, 256, size=shape).astype("int32")
    others = rng.integers(0, 256, size=shape).astype("int32")
    rows = []
    for norm in norms:
        for training in modes:
            # A model per mode: training calls move BatchNorm's moving
            # averages, which inference reads.
            model = build(norm, seed)
            base = model(ids, training=training).numpy()
            rows.append(
                {
                    "norm": norm,
                    "mode": "training" if training else "inference",
                    "future": future_change(model, ids, base, training),
                    "batch": batch_change(model, ids, base, others, training),
                    "halves": split_change(model, ids, base, training),
                    "replicas": (
                        replica_change(model, norm, seed, ids, base, training)
                        if replicas
                        else None
                    ),
                }
            )
    return rows


NORM_TITLES = {
    "layer": "LayerNormalization (tfnorm)",
    "rms": "RMSNorm (tfnorm)",
    "batch": "BatchNormalization (Keras)",
    "batch_synchronized": "BatchNormalization, synchronised (Keras)",
}


def _cell(value):
    if value is None:
        return "-"
    return "0" if value == 0 else f"{value:.2g}"


def markdown(rows):
    lines = [
        "| norm | mode | future tokens | other sequences | two half batches | "
        "two replicas |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        cells = " | ".join(_cell(row[m]) for m in MEASURES)
        lines.append(f"| {NORM_TITLES[row['norm']]} | {row['mode']} | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--json", help="also write every figure to this file")
    args = parser.parse_args(argv)
    replicas = use_two_cpu_devices()
    rows = measure(seed=args.seed, replicas=replicas)
    table = markdown(rows)
    print(table, end="")
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as handle:
            handle.write(table)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"sizes": SIZES, "batch": BATCH, "rows": rows}, handle, indent=2)


if __name__ == "__main__":
    main()

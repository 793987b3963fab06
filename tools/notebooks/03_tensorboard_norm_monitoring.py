# ruff: noqa: E402
# Source of notebooks/03_tensorboard_norm_monitoring.ipynb (see tools/make_notebooks.py).

# %% [markdown]
# # Watching normalisation layers in TensorBoard
#
# Keras's `TensorBoard(histogram_freq=...)` records **weights**. When a Transformer
# misbehaves, the first sign is usually in the **activations** around its norm
# layers: a residual stream that keeps growing, a norm whose input variance
# collapses toward `epsilon`, or an overflow to Inf in float16 that the next norm
# turns into NaN. `tfnorm.callbacks` records exactly those:
#
# * `NormHistogramCallback`: histograms and scalars (mean, std, min, max,
#   non-finite fraction) of every norm layer's outputs and inputs, tagged by the
#   layer's path in the model (`encoder/block_1/ffn_norm/outputs`);
# * `GradientNormCallback`: each layer's gradient norm on a probe batch (the
#   Xiong et al. plot, live);
# * `NormHealthMonitor`: names the layer and the step when a norm sees NaN/Inf or a
#   collapsing variance, and warns, stops training or raises.
#
# All three run the model on a fixed probe batch in a separate function, so
# training itself is unchanged.

# %% tags=["parameters"]
# Small defaults for 2 CPU cores. On a GPU, try NUM_EXAMPLES = 20000, EPOCHS = 10,
# NUM_LAYERS = 6, D_MODEL = 256, EVERY_N_STEPS = 100.
NUM_EXAMPLES = 1024
EPOCHS = 3
NUM_LAYERS = 2
D_MODEL = 32
MAX_LEN = 16
BATCH_SIZE = 64
EVERY_N_STEPS = 8  # record every this many training steps
# JupyterLab runs a notebook in its own folder: in the container that is
# /workspace/notebooks, and ../runs is /workspace/runs, the folder its
# TensorBoard service watches (the host's runs/).
LOG_DIR = "../runs/norm_monitoring"
# True starts an embedded TensorBoard below. It stays False when the notebook is
# executed headless (CI, papermill): the server would outlive the run with nobody
# to look at it. Set it to True when you work in JupyterLab.
LAUNCH_TENSORBOARD = False
SEED = 0

# %%
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import warnings

import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

import tfnorm
from tfnorm.callbacks import (
    GradientNormCallback,
    NormHealthMonitor,
    NormHealthWarning,
    NormHistogramCallback,
)
from tfnorm.training.data import make_synthetic

keras = tf.keras
print("TensorFlow", tf.__version__, "| tfnorm", tfnorm.__version__)

# %% [markdown]
# ## 1. Train a classifier with the three callbacks
#
# A small Pre-LN Transformer classifier from `tfnorm.build_classifier` on the
# synthetic `majority` task. The probe batch is a fixed slice of the validation
# set; the same slice every time makes the histograms comparable across steps.

# %%
train, val = make_synthetic(
    "majority", num_examples=NUM_EXAMPLES, max_len=MAX_LEN, seed=SEED
)
keras.utils.set_random_seed(SEED)
model = tfnorm.build_classifier(
    train.vocab_size,
    MAX_LEN,
    train.num_classes,
    num_layers=NUM_LAYERS,
    d_model=D_MODEL,
    num_heads=4,
    dff=4 * D_MODEL,
    norm_position="pre",
)
model.compile(
    keras.optimizers.Adam(1e-3),
    keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)
probe = (val.ids[:64], val.labels[:64])

histograms = NormHistogramCallback(
    os.path.join(LOG_DIR, "norms"),
    probe[0],
    every_n_steps=EVERY_N_STEPS,
    record=("inputs", "outputs"),
)
gradients = GradientNormCallback(
    os.path.join(LOG_DIR, "gradients"), probe, every_n_steps=EVERY_N_STEPS
)
health = NormHealthMonitor(probe[0], on_problem="warn", every_n_steps=EVERY_N_STEPS)
history = model.fit(
    train.ids,
    train.labels,
    validation_data=(val.ids, val.labels),
    epochs=EPOCHS,
    batch_size=BATCH_SIZE,
    callbacks=[
        histograms,
        gradients,
        health,
        # Keras's own callback for the loss curves and weight histograms.
        keras.callbacks.TensorBoard(os.path.join(LOG_DIR, "keras")),
    ],
    verbose=0,
)
print(
    "final:", {name: round(values[-1], 3) for name, values in history.history.items()}
)
print("health problems found:", health.problems)

# %% [markdown]
# ## 2. Open TensorBoard
#
# In JupyterLab, set `LAUNCH_TENSORBOARD = True` in the parameters cell and run the
# cell below: `%tensorboard` starts a TensorBoard server on port 6006 and embeds
# it. In the tfnorm container a TensorBoard service already watches
# `/workspace/runs` on port 6006 (see `docker-compose.yml`); open it directly. Over
# SSH, forward the port first: `ssh -L 6006:127.0.0.1:6006 user@host`.
#
# From a shell in the workspace (the repository's root on a host), the same:
# `tensorboard --logdir runs --port 6006`.

# %%
# %load_ext tensorboard
if LAUNCH_TENSORBOARD:
    # %tensorboard --logdir $LOG_DIR
    pass
else:
    print(f"TensorBoard not started (LAUNCH_TENSORBOARD=False); logs are in {LOG_DIR}")

# %% [markdown]
# ## 3. What was written
#
# The event files can be read back with TensorBoard's own reader; this is also how
# you can post-process them (here, to draw the same pictures inline). The
# histogram tags, one pair per norm layer:


# %%
def read_run(path):
    accumulator = event_accumulator.EventAccumulator(
        path, size_guidance={event_accumulator.TENSORS: 0}
    )
    accumulator.Reload()
    return accumulator


norm_events = read_run(os.path.join(LOG_DIR, "norms"))
histogram_tags = sorted(norm_events.PluginTagToContent("histograms"))
for tag in histogram_tags:
    steps = [event.step for event in norm_events.Tensors(tag)]
    print(f"{tag:50s} steps {steps[0]}..{steps[-1]} ({len(steps)} records)")

# %% [markdown]
# ## 4. How to read the histograms
#
# In TensorBoard's **Histograms** tab (or **Distributions**, the same data as
# percentile bands), each tag shows one distribution per recorded step, the oldest
# at the back.
#
# * **`.../outputs` of a norm** should stay centred near 0 with a spread near 1,
#   scaled by the learned `gamma`/`beta`. Slow drift is learning; a sudden jump is
#   not.
# * **`.../inputs` of a norm** in a Pre-LN stack is the residual stream: its spread
#   grows with depth and with training. That is expected; a spread growing by
#   orders of magnitude means the residual stream is blowing up (float16 overflows
#   at 65504).
# * An **input spread collapsing toward 0** means `epsilon` starts to dominate the
#   denominator, the norm stops normalising and its gradient vanishes;
#   `NormHealthMonitor` checks this against `variance_floor × epsilon`.
# * The **scalars** next to each histogram (`.../std`, `.../max`,
#   `.../nonfinite_fraction`) are easier to compare across layers: one line per
#   layer in the Scalars tab, filtered by a regex such as `inputs/std`.
#
# Below: the first and last block's FFN norm, inputs and outputs, one curve per
# recorded step (darker = later).


# %%
def histogram_series(accumulator, tag):
    """[(step, bucket centres, counts)] from a TF2 histogram summary."""
    series = []
    for event in accumulator.Tensors(tag):
        buckets = tf.make_ndarray(event.tensor_proto)  # rows: left, right, count
        series.append((event.step, (buckets[:, 0] + buckets[:, 1]) / 2, buckets[:, 2]))
    return series


chosen = [
    tag
    for tag in histogram_tags
    if tag.endswith("ffn_norm/inputs") or tag.endswith("ffn_norm/outputs")
]
chosen = [t for t in chosen if "block_0/" in t or f"block_{NUM_LAYERS - 1}/" in t]
figure, axes = plt.subplots(1, len(chosen), figsize=(4 * len(chosen), 3.2))
for ax, tag in zip(np.atleast_1d(axes), chosen):
    series = histogram_series(norm_events, tag)
    for index, (_step, centres, counts) in enumerate(series):
        shade = plt.cm.viridis(index / max(1, len(series) - 1))
        ax.plot(centres, counts, color=shade, lw=1)
    ax.set_title(tag.replace("encoder/", ""), fontsize=9)
    ax.set_xlabel("value")
axes[0].set_ylabel("count")
figure.tight_layout()
plt.show()

# %% [markdown]
# And the per-layer gradient norms of `GradientNormCallback`, first and last record.
# In TensorBoard they are the scalars `<layer path>/grad_norm`.

# %%
gradient_events = read_run(os.path.join(LOG_DIR, "gradients"))
scalar_tags = sorted(gradient_events.PluginTagToContent("scalars"))
ffn_tags = [t for t in scalar_tags if "ffn_output" in t]
print(f"{len(scalar_tags)} gradient-norm series, e.g. {ffn_tags[:2]}")
figure, ax = plt.subplots(figsize=(6, 3.2))
for which, label in ((0, "first record"), (-1, "last record")):
    values = [
        float(tf.make_ndarray(gradient_events.Tensors(tag)[which].tensor_proto))
        for tag in ffn_tags
    ]
    ax.plot(range(len(values)), values, "o-", label=label)
ax.set(
    xlabel="block",
    ylabel="FFN output gradient norm",
    xticks=range(len(ffn_tags)),
    title="GradientNormCallback",
)
ax.legend()
plt.show()

# %% [markdown]
# ## 5. A float16 failure, caught
#
# A classic mixed-precision accident: features in raw units (here, values in the
# tens of thousands, like prices or counts) go into a Dense layer. Each value
# still fits in float16 (up to 65504), and in float32 the model is only poorly
# conditioned; in float16 the Dense output's sums exceed 65504, become `inf`,
# and the norm after it turns the `inf` into NaN. The loss goes NaN and nothing
# says where.
#
# `NormHealthMonitor(on_problem="stop")` names the layer and the step and stops
# `fit`. (Inside a Transformer the same happens when the residual stream grows
# past float16's range; the monitor reports the first norm in call order that
# sees it, which is where the NaN starts.)

# %%
rng = np.random.default_rng(SEED)
raw_features = rng.uniform(1e4, 6e4, size=(512, 64)).astype("float32")
raw_targets = (raw_features[:, :32].mean(-1) > raw_features[:, 32:].mean(-1)).astype(
    "int32"
)


def raw_feature_model():
    inputs = keras.Input((64,), name="features")
    h = keras.layers.Dense(64, activation="relu", name="hidden")(inputs)
    h = tfnorm.LayerNormalization(name="hidden_norm")(h)
    h = keras.layers.Dense(64, activation="relu", name="hidden_2")(h)
    h = tfnorm.LayerNormalization(name="hidden_2_norm")(h)
    logits = keras.layers.Dense(2, dtype="float32", name="logits")(h)
    model = keras.Model(inputs, logits, name="raw_features")
    optimizer = tfnorm.training.wrap_for_mixed_precision(keras.optimizers.Adam(1e-3))
    model.compile(
        optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    return model


def fit_with_monitor(precision):
    tfnorm.training.set_mixed_precision(precision)
    try:
        keras.utils.set_random_seed(SEED)
        model = raw_feature_model()
        monitor = NormHealthMonitor(
            raw_features[:32], on_problem="stop", every_n_steps=4
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", NormHealthWarning)
            history = model.fit(
                raw_features,
                raw_targets,
                epochs=2,
                batch_size=32,
                verbose=0,
                callbacks=[monitor],
            )
    finally:
        tfnorm.training.set_mixed_precision(None)
    return (
        history,
        monitor,
        [w for w in caught if issubclass(w.category, NormHealthWarning)],
    )


history32, monitor32, warned32 = fit_with_monitor("float32")
print(
    f"float32: {len(history32.history['loss'])} epochs, last loss "
    f"{history32.history['loss'][-1]:.3f}, problems: {len(monitor32.problems)}"
)

history16, monitor16, warned16 = fit_with_monitor("float16")
print(
    f"float16: stopped after {len(history16.history['loss'])} epoch(s), "
    f"{len(monitor16.problems)} problem(s):"
)
for problem in monitor16.problems[:6]:
    where = f"layer {problem.layer!r}" if problem.layer else "the loss"
    print(
        f"  step {problem.step}: {where}, {problem.statistic} = "
        f"{problem.value:.3g} (threshold {problem.threshold})"
    )
if warned16:
    print("\nthe warning:", str(warned16[0].message).split("\n")[0])

assert monitor16.problems, "the float16 overflow should have been reported"
assert any(p.layer == "hidden_norm" for p in monitor16.problems)

# %% [markdown]
# What the report tells you, and the fixes: the first layer named is
# `hidden_norm`, whose **input** is non-finite, so the overflow happened in the
# layer before it (`hidden`), not in the norm. Standardise the features (or put a
# norm *before* the first Dense), keep the first layers in float32
# (`dtype="float32"` on them), or train in bfloat16, which has float32's range
# (`tfnorm.training.set_mixed_precision("bfloat16")`). In `model.fit` you can also
# use `on_problem="raise"` to get a `NormHealthError` naming the layer, and
# `tfnorm train` stops on a NaN without overwriting its last good checkpoint.

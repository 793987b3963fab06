# ruff: noqa: E402
# Source of notebooks/05_decoder.ipynb (see tools/make_notebooks.py).

# %% [markdown]
# # A LLaMA-style decoder: build, train, sample, watch its norms
#
# `tfnorm.build_decoder(..., preset="llama")` builds a decoder-only causal language
# model the way LLaMA is built: Pre-LN RMSNorm (epsilon 1e-6) before attention and
# before the feed-forward block, rotary position embeddings, a SwiGLU feed-forward,
# no biases, a final RMSNorm and an output head of its own. It runs in Keras 3,
# `tf_keras` and the Keras 2.9 of the TensorFlow 2.9 container, which has no
# keras-hub. This notebook:
#
# 1. cuts real text into byte-level tokens: Python's own reference documentation,
#    which ships with Python (`pydoc_data.topics`, the text `help("for")` prints),
#    so nothing is downloaded;
# 2. trains a small decoder on it for a few hundred steps, and measures bits per
#    byte on held-out topics against a unigram baseline;
# 3. samples from it with `tfnorm.generate` (greedy, and top-p with a seed);
# 4. reads back the histograms `tfnorm.callbacks.NormHistogramCallback` wrote of
#    every RMSNorm's inputs and outputs, in the folder the container's TensorBoard
#    watches.
#
# The defaults train in about five minutes on 2 CPU cores; the model is far too small
# and too briefly trained to write good text.

# %% tags=["parameters"]
# Small defaults for 2 CPU cores. On a GPU, try NUM_LAYERS = 8, D_MODEL = 512,
# DFF = 1376, SEQ_LEN = 256, BATCH_SIZE = 64, STEPS = 5000.
NUM_LAYERS = 4
D_MODEL = 128
NUM_HEADS = 4
NUM_KV_HEADS = 2  # grouped-query attention: two heads share each key/value head
DFF = 384  # the SwiGLU's hidden width
SEQ_LEN = 128  # bytes per training window, and the model's max_len
BATCH_SIZE = 16
STEPS = 400  # training steps
EVAL_EVERY = 25  # steps between two measurements on the held-out topics
HISTOGRAM_EVERY = 50  # steps between two records of the norms' histograms
LEARNING_RATE = 2e-3
VAL_WINDOWS = 128  # held-out windows, spread evenly over the held-out text
NEW_TOKENS = 96  # bytes generated after each prompt (prompt + these <= SEQ_LEN)
# JupyterLab runs a notebook in its own folder: in the container that is
# /workspace/notebooks, and ../runs is /workspace/runs, the folder its
# TensorBoard service watches (the host's runs/).
LOG_DIR = "../runs/decoder"
SEED = 0

# %%
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import math
import pydoc_data.topics
import time

import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

import tfnorm
from tfnorm.callbacks import NormHistogramCallback

# Keras 3, tf_keras or Keras 2.9: the code below runs on all three.
keras = tf.keras
print("TensorFlow", tf.__version__, "| tfnorm", tfnorm.__version__)

# %% [markdown]
# ## 1. Text as bytes
#
# Each token is one byte of the UTF-8 text (256 ids, no tokenizer to train), so a
# loss in nats per token is directly a number of **bits per byte** after dividing
# by ln 2. Every tenth topic (in sorted order) is held out: the model never trains
# on it, and the bits per byte below are measured on it.
#
# The baseline is the best model that ignores context: each byte's frequency in
# the training text (add-one smoothed), scored on the held-out bytes. Anything the
# decoder does better than that it learned from context.

# %%
topics = sorted(pydoc_data.topics.topics)
held_out = set(topics[::10])


def to_bytes(names):
    text = "\n\n".join(pydoc_data.topics.topics[name] for name in names)
    return np.frombuffer(text.encode("utf-8"), np.uint8).astype("int32")


train_bytes = to_bytes(name for name in topics if name not in held_out)
val_bytes = to_bytes(name for name in topics if name in held_out)
print(
    f"{len(topics)} topics: {len(train_bytes):,} training bytes, "
    f"{len(val_bytes):,} held-out bytes ({len(held_out)} topics)"
)


def windows(data, starts):
    """Inputs and next-byte targets of the windows starting at `starts`."""
    chunks = np.stack([data[start : start + SEQ_LEN + 1] for start in starts])
    return chunks[:, :-1], chunks[:, 1:]


rng = np.random.default_rng(SEED)
train_x, train_y = windows(
    train_bytes, rng.integers(0, len(train_bytes) - SEQ_LEN, STEPS * BATCH_SIZE)
)
# The held-out set: non-overlapping windows spread evenly over the held-out text.
val_starts = np.arange(0, len(val_bytes) - SEQ_LEN, SEQ_LEN)
val_x, val_y = windows(
    val_bytes, val_starts[:: max(1, len(val_starts) // VAL_WINDOWS)][:VAL_WINDOWS]
)

counts = np.bincount(train_bytes, minlength=256) + 1.0
unigram_bits = float(-np.mean(np.log2((counts / counts.sum())[val_y])))
print(
    f"{len(val_x)} held-out windows of {SEQ_LEN} bytes; "
    f"unigram baseline: {unigram_bits:.3f} bits per byte"
)
print(
    "a training window:",
    repr(bytes(train_x[0].astype("uint8")).decode(errors="replace")),
)

# %% [markdown]
# ## 2. The model
#
# One call; the `llama` preset sets the architecture and every entry of it can be
# overridden by keyword (here the grouped-query attention's `num_kv_heads`).

# %%
keras.utils.set_random_seed(SEED)
model = tfnorm.build_decoder(
    NUM_LAYERS,
    D_MODEL,
    NUM_HEADS,
    DFF,
    vocab_size=256,
    max_len=SEQ_LEN,
    preset="llama",
    num_kv_heads=NUM_KV_HEADS,
)
block = model.get_layer("block_0")
print(f"{model.count_params():,} parameters, {NUM_LAYERS} blocks")
print(
    "each block:",
    {
        "norm": type(block.attention_norm).__name__,
        "epsilon": block.attention_norm.epsilon,
        "norm_position": block.norm_position,
        "feed_forward": block.feed_forward,
        "use_bias": block.use_bias,
    },
)
print(
    "after the blocks:",
    type(model.get_layer("final_norm")).__name__,
    "then",
    model.get_layer("lm_head").name,
)

# %% [markdown]
# ## 3. Training, with the norms recorded
#
# Next-byte prediction: the targets are the inputs shifted by one, the loss is
# cross-entropy on the logits. Each "epoch" below is `EVAL_EVERY` steps, after
# which Keras measures the loss on the held-out windows.
#
# `NormHistogramCallback` runs the model on a fixed probe batch (four held-out
# windows) every `HISTOGRAM_EVERY` steps and at the end of every epoch, in a
# function of its own, so training is unchanged, and writes histograms and
# scalars of every norm's inputs and outputs to `LOG_DIR/norms`. Keras's
# `TensorBoard` callback writes the loss curves to `LOG_DIR/keras`.

# %%
model.compile(
    keras.optimizers.Adam(LEARNING_RATE, clipnorm=1.0),
    keras.losses.SparseCategoricalCrossentropy(from_logits=True),
)
train_data = (
    tf.data.Dataset.from_tensor_slices((train_x, train_y))
    .batch(BATCH_SIZE, drop_remainder=True)
    .repeat()
)
histograms = NormHistogramCallback(
    os.path.join(LOG_DIR, "norms"),
    val_x[:4],
    every_n_steps=HISTOGRAM_EVERY,
    record=("inputs", "outputs"),
)
started = time.time()
history = model.fit(
    train_data,
    steps_per_epoch=EVAL_EVERY,
    epochs=STEPS // EVAL_EVERY,
    validation_data=(val_x, val_y),
    callbacks=[histograms, keras.callbacks.TensorBoard(os.path.join(LOG_DIR, "keras"))],
    shuffle=False,  # the windows were drawn at random already
    verbose=0,
)
elapsed = time.time() - started
train_bits = np.array(history.history["loss"]) / math.log(2)
val_bits = np.array(history.history["val_loss"]) / math.log(2)
print(
    f"{STEPS // EVAL_EVERY * EVAL_EVERY} steps in {elapsed:.0f} s; held-out bits per "
    f"byte {val_bits[0]:.3f} after {EVAL_EVERY} steps, {val_bits[-1]:.3f} at the end "
    f"(unigram baseline {unigram_bits:.3f})"
)

# %% [markdown]
# The training curve is each epoch's mean loss over its steps (the model changes
# during the epoch); the held-out curve is measured after the epoch, on every
# position of every held-out window (the first bytes of a window have little
# context, which the mean includes).

# %%
steps = EVAL_EVERY * np.arange(1, len(val_bits) + 1)
figure, ax = plt.subplots(figsize=(6.5, 3.5))
ax.plot(steps, train_bits, "o-", label="training (epoch mean)")
ax.plot(steps, val_bits, "o-", label="held-out topics")
ax.axhline(unigram_bits, color="gray", ls="--", label="unigram baseline")
ax.set(
    xlabel="training step",
    ylabel="bits per byte",
    title="Byte-level LLaMA-style decoder",
)
ax.legend()
plt.show()

# %% [markdown]
# ## 4. Sampling with `tfnorm.generate`
#
# `generate` keeps the keys and values of earlier positions in a cache, so each new
# byte costs one position of compute, and it compiles the whole loop once per
# batch shape (with XLA where the runtime has it). Prompts of different lengths
# share a batch. **Greedy** decoding takes the most likely byte each time (small
# models soon repeat themselves); **top-p** samples from the smallest set of bytes
# whose probability reaches `p`: the same `seed` gives the same text.

# %%
prompts = ['The "while" statement\n', "Built-in Functions\n", "   def "]
prompt_ids = [
    np.frombuffer(p.encode("utf-8"), np.uint8).astype("int32") for p in prompts
]


def show(outputs):
    for prompt, ids in zip(prompts, outputs):
        new = bytes(ids[len(prompt.encode("utf-8")) :].astype("uint8"))
        print(f"{prompt!r} →\n    {new.decode('utf-8', errors='replace')!r}\n")


started = time.time()
greedy = tfnorm.generate(model, prompt_ids, NEW_TOKENS, sampler="greedy")
print(f"greedy ({time.time() - started:.1f} s, compilation included):")
show(greedy)
sampled = tfnorm.generate(
    model, prompt_ids, NEW_TOKENS, top_p=0.9, temperature=0.8, seed=SEED
)
print("top-p, p=0.9, temperature 0.8, seed", SEED, ":")
show(sampled)
again = tfnorm.generate(
    model, prompt_ids, NEW_TOKENS, top_p=0.9, temperature=0.8, seed=SEED
)
print(
    "the same seed again gives the same bytes:",
    all(np.array_equal(a, b) for a, b in zip(sampled, again)),
)

# %% [markdown]
# ## 5. The norms in TensorBoard
#
# In the tfnorm container a TensorBoard service watches `/workspace/runs` on port
# 6006 (`docker-compose.yml`), and `LOG_DIR` is inside it, so this run appears
# there as `decoder/norms` and `decoder/keras`; over SSH, forward the port first
# (`ssh -L 6006:127.0.0.1:6006 user@host`). Elsewhere: `tensorboard --logdir
# ../runs`. Notebook 03 explains how to read each tag.
#
# The same event files, read back here with TensorBoard's reader. One tag per norm
# and direction, named by the layer's path in the model:

# %%
norm_events = event_accumulator.EventAccumulator(
    os.path.join(LOG_DIR, "norms"), size_guidance={event_accumulator.TENSORS: 0}
)
norm_events.Reload()
histogram_tags = sorted(norm_events.PluginTagToContent("histograms"))
for tag in histogram_tags:
    recorded = [event.step for event in norm_events.Tensors(tag)]
    print(f"{tag:40s} steps {recorded[0]}..{recorded[-1]} ({len(recorded)} records)")

# %% [markdown]
# An RMSNorm does not subtract the mean: its output is its input divided by the
# input's root mean square, times a learned per-feature scale (initialised to 1).
# Below, for the first and the last block, the feed-forward norm's input (the
# residual stream) and output, one curve per record (darker = later).


# %%
def histogram_series(tag):
    """[(step, bucket centres, counts)] of a TF2 histogram summary."""
    series = []
    for event in norm_events.Tensors(tag):
        buckets = tf.make_ndarray(event.tensor_proto)  # rows: left, right, count
        series.append((event.step, (buckets[:, 0] + buckets[:, 1]) / 2, buckets[:, 2]))
    return series


last = NUM_LAYERS - 1
chosen = [
    tag
    for tag in histogram_tags
    if any(f"block_{i}/ffn_norm/" in tag for i in (0, last))
]
figure, axes = plt.subplots(1, len(chosen), figsize=(3.6 * len(chosen), 3.2))
for ax, tag in zip(np.atleast_1d(axes), chosen):
    series = histogram_series(tag)
    for index, (_step, centres, counts) in enumerate(series):
        ax.plot(
            centres, counts, color=plt.cm.viridis(index / max(1, len(series) - 1)), lw=1
        )
    ax.set_title(tag, fontsize=9)
    ax.set_xlabel("value")
np.atleast_1d(axes)[0].set_ylabel("count")
figure.tight_layout()
plt.show()

# %% [markdown]
# The scalars beside each histogram are easier to compare across layers: the
# standard deviation of every norm's input over training. In a Pre-LN stack each
# block adds to the residual stream, so deeper norms see a wider input; the norm
# divides that back to unit scale. The first norm (`block_0/attention_norm`) sees
# the token embeddings themselves, initialised small (std 0.02).

# %%
scalar_tags = sorted(
    tag
    for tag in norm_events.PluginTagToContent("scalars")
    if tag.endswith("/inputs/std")
)
figure, ax = plt.subplots(figsize=(6.5, 3.5))
for tag in scalar_tags:
    events = norm_events.Tensors(tag)
    ax.plot(
        [event.step for event in events],
        [float(tf.make_ndarray(event.tensor_proto)) for event in events],
        "o-",
        ms=3,
        label=tag[: -len("/inputs/std")],
    )
ax.set(xlabel="training step", ylabel="std of the norm's input", yscale="log")
ax.legend(fontsize=7, ncol=2)
plt.show()

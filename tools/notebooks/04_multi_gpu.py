# ruff: noqa: E402
# Source of notebooks/04_multi_gpu.ipynb (see tools/make_notebooks.py).

# %% [markdown]
# # Several GPUs, several machines
#
# `tf.distribute` runs one copy of the model per device (a *replica*), splits each
# batch between them and sums the gradients before every update. tfnorm adds one
# helper, `tfnorm.distribute.get_strategy()`, that picks the strategy from the
# machine and the `TF_CONFIG` environment variable, and the `tfnorm train` command
# uses it (`--strategy auto`).
#
# This notebook:
#
# 1. shows what `get_strategy("auto")` picks here, and why;
# 2. trains a classifier under `MirroredStrategy` — over all GPUs when there are
#    several, otherwise over **two logical CPU devices**, so it runs anywhere;
# 3. explains the **global batch** and checks that two replicas give the same loss
#    trajectory as one device at the same global batch;
# 4. shows how to go multi-worker (`MultiWorkerMirroredStrategy`, `TF_CONFIG`).

# %% tags=["parameters"]
# Small defaults for 2 CPU cores. On a multi-GPU machine, try NUM_EXAMPLES = 50000,
# EPOCHS = 5, PER_REPLICA_BATCH = 128, NUM_LAYERS = 6, D_MODEL = 256.
NUM_EXAMPLES = 1024
EPOCHS = 2
PER_REPLICA_BATCH = 32
NUM_LAYERS = 2
D_MODEL = 32
MAX_LEN = 16
LEARNING_RATE = 1e-3  # for the global batch below (see section 3)
LOGICAL_CPUS = 2  # replicas on a machine without GPUs
SEED = 0

# %% [markdown]
# Logical devices must be configured before TensorFlow initialises its runtime,
# so this cell comes first. Without GPUs, the one CPU is split into
# `LOGICAL_CPUS` logical devices; with GPUs nothing changes. (Re-running it after
# TensorFlow has started needs a kernel restart, as the message says.)

# %%
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

# MirroredStrategy logs every all-reduce it sets up at INFO level.
tf.get_logger().setLevel("ERROR")
gpus = tf.config.list_physical_devices("GPU")
if not gpus:
    try:
        tf.config.set_logical_device_configuration(
            tf.config.list_physical_devices("CPU")[0],
            [tf.config.LogicalDeviceConfiguration() for _ in range(LOGICAL_CPUS)],
        )
    except RuntimeError as error:
        print(f"Restart the kernel to change logical devices ({error}).")
print("GPUs:", len(gpus), "| logical CPUs:", len(tf.config.list_logical_devices("CPU")))

# %%
import json

import matplotlib.pyplot as plt
import numpy as np

import tfnorm
from tfnorm import distribute
from tfnorm.training.data import make_synthetic

keras = tf.keras
print("TensorFlow", tf.__version__, "| tfnorm", tfnorm.__version__)

# %% [markdown]
# ## 1. What `get_strategy("auto")` picks
#
# In order: `MultiWorkerMirroredStrategy` when `TF_CONFIG` names more than one
# worker; `MirroredStrategy` over all GPUs when there are two or more;
# `OneDeviceStrategy` with one GPU; otherwise the default strategy (no
# distribution). `distribute.choose()` tells you the decision and the reason
# without building anything (`tfnorm info` prints the same line).

# %%
kind, reason = distribute.choose("auto")
print(f"auto -> {kind} ({reason})")
auto_strategy = distribute.get_strategy()
print(
    type(auto_strategy).__name__,
    "with",
    auto_strategy.num_replicas_in_sync,
    "replica(s)",
)

# %% [markdown]
# ## 2. MirroredStrategy
#
# Asking for `"mirrored"` explicitly; `devices=None` means all GPUs. On a machine
# without GPUs we pass the logical CPUs, which is how tfnorm's tests check
# distributed training without GPUs (`tfnorm train --strategy mirrored --devices
# /cpu:0,/cpu:1` does the same from a shell).
#
# Everything that creates variables — the model, the optimizer, `compile` — goes
# inside `strategy.scope()`.

# %%
devices = (
    None if len(gpus) >= 2 else [d.name for d in tf.config.list_logical_devices("CPU")]
)
strategy = distribute.get_strategy("mirrored", devices=devices)
replicas = strategy.num_replicas_in_sync
print("replicas:", replicas, [d for d in strategy.extended.worker_devices])

# %% [markdown]
# ## 3. The global batch
#
# Keras splits every batch it draws from the dataset across the replicas: **the
# batch size you give is the global batch**, each replica sees
# `global_batch / replicas` examples, and the gradients are averaged over the
# whole global batch. So:
#
# * scale the batch with the replicas to keep each device equally busy:
#   `global_batch = PER_REPLICA_BATCH * replicas` (`tfnorm train --batch-size` is
#   global too);
# * a larger global batch means fewer, less noisy steps per epoch; the usual
#   adjustment is to scale the learning rate with the global batch (linearly for
#   SGD; for Adam(W) rather by its square root) and to keep a warm-up, which large
#   batches need even more;
# * at the **same** global batch, the replicas compute the same averaged gradient
#   as one device would. The check below trains the same model from the same
#   weights on the same batches, once on one device and once on `replicas`
#   devices: first with plain SGD, whose update is linear in the gradient, so the
#   two loss trajectories must agree to float32 rounding; then with tfnorm's AdamW
#   and a warm-up, as you would train for real.
#
# Dropout is off in this comparison: each replica draws its own dropout masks,
# which is correct but not bit-comparable with one device.

# %%
train, val = make_synthetic(
    "majority", num_examples=NUM_EXAMPLES, max_len=MAX_LEN, seed=SEED
)
global_batch = PER_REPLICA_BATCH * replicas
steps_per_epoch = NUM_EXAMPLES // global_batch
print(
    f"global batch {global_batch} = {PER_REPLICA_BATCH} per replica x {replicas} replicas"
)
print(f"{steps_per_epoch} steps per epoch")


class BatchLosses(keras.callbacks.Callback):
    """Records the loss Keras reports after every batch."""

    def on_train_begin(self, logs=None):
        self.losses = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))


def build_model(optimizer_name="adamw"):
    model = tfnorm.build_classifier(
        train.vocab_size,
        MAX_LEN,
        train.num_classes,
        num_layers=NUM_LAYERS,
        d_model=D_MODEL,
        num_heads=4,
        dff=4 * D_MODEL,
        dropout_rate=0.0,
    )
    if optimizer_name == "sgd":
        optimizer = tfnorm.training.make_optimizer("sgd", 0.1)
    else:
        schedule = tfnorm.training.WarmupSchedule(
            LEARNING_RATE,
            warmup_steps=steps_per_epoch,
            total_steps=EPOCHS * steps_per_epoch,
        )
        optimizer = tfnorm.training.make_optimizer("adamw", schedule, model=model)
    model.compile(
        optimizer,
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def train_under(strategy, initial_weights, optimizer_name, epochs):
    with strategy.scope():
        model = build_model(optimizer_name)
        # Both runs start from the same weights, so only the distribution differs.
        model.set_weights(initial_weights)
    # drop_remainder keeps every global batch divisible by the replicas.
    dataset = tf.data.Dataset.from_tensor_slices((train.ids, train.labels))
    dataset = dataset.batch(global_batch, drop_remainder=True)
    recorder = BatchLosses()
    # The dataset's order is the order: Keras 3 warns that its default
    # shuffle=True does nothing on a tf.data.Dataset.
    model.fit(dataset, epochs=epochs, callbacks=[recorder], verbose=0, shuffle=False)
    accuracy = model.evaluate(val.ids, val.labels, batch_size=global_batch, verbose=0)
    return np.array(recorder.losses), accuracy[1]


keras.utils.set_random_seed(SEED)
initial_weights = build_model().get_weights()
one_device = distribute.get_strategy("one_device")
runs = {}
for optimizer_name, epochs in (("sgd", 1), ("adamw", EPOCHS)):
    for label, chosen in (
        ("one device", one_device),
        (f"{replicas} replicas", strategy),
    ):
        runs[optimizer_name, label] = train_under(
            chosen, initial_weights, optimizer_name, epochs
        )
        losses, accuracy = runs[optimizer_name, label]
        print(
            f"{optimizer_name:5s} {label:11s} final loss {losses[-1]:.4f}, "
            f"val accuracy {accuracy:.3f}"
        )

differences = {}
figure, axes = plt.subplots(1, 2, figsize=(12, 3.5))
for ax, optimizer_name in zip(axes, ("sgd", "adamw")):
    single = runs[optimizer_name, "one device"][0]
    mirrored = runs[optimizer_name, f"{replicas} replicas"][0]
    differences[optimizer_name] = np.abs(single - mirrored).max() / np.abs(single).max()
    print(
        f"{optimizer_name}: largest per-step loss difference, relative: "
        f"{differences[optimizer_name]:.1e}"
    )
    ax.plot(single, label="one device", lw=2.5, alpha=0.6)
    ax.plot(mirrored, "--", label=f"MirroredStrategy, {replicas} replicas")
    ax.set(
        xlabel="step",
        ylabel="loss (running mean per epoch)",
        title=f"{optimizer_name}, global batch {global_batch}",
    )
    ax.grid(alpha=0.3)
    ax.legend()
plt.show()
# SGD's update is linear in the averaged gradient: only float32 summation order
# differs between the runs.
assert differences["sgd"] < 1e-4, differences
adamw_losses = runs["adamw", f"{replicas} replicas"][0]
assert adamw_losses[-1] < adamw_losses[0], "the distributed run did not train"

# %% [markdown]
# What to look for: with SGD the two curves lie on top of each other, the
# difference printed is at float32 rounding level. With AdamW under `model.fit`
# they stay close but are not bit-identical (in our runs with Keras 3, the
# difference was visible after the first update, while SGD's was not): compare
# outcomes — final loss, accuracy — rather than exact values when you change the
# number of devices. If the curves drift apart clearly in your own code, look for
# per-replica randomness (dropout, data shuffling without a seed), a loss reduced
# per replica instead of over the global batch (custom training loops must divide
# by the **global** batch, e.g. with `tf.nn.compute_average_loss`), or a batch
# size that is not divisible by the replicas.
#
# ## 4. Multi-worker: several machines
#
# `MultiWorkerMirroredStrategy` runs one process per machine (each using all its
# GPUs; give every worker the same number). Each process learns its place from the
# `TF_CONFIG` environment variable: the list of all workers and which one it is.
# Worker 0 (or a task of type `"chief"`) is the chief: it writes checkpoints,
# TensorBoard summaries and the exported model.
#
# `get_strategy("auto")` switches to multi-worker as soon as `TF_CONFIG` names more
# than one worker, and rejects a malformed `TF_CONFIG` with a message naming the
# problem:

# %%
cluster = {"worker": ["10.0.0.1:12345", "10.0.0.2:12345"]}
for index in range(2):
    tf_config = distribute.parse_tf_config(
        json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
    )
    kind, reason = distribute.choose("auto", tf_config=tf_config, num_gpus=4)
    print(f"worker {index}: {kind} ({reason}), chief: {distribute.is_chief(tf_config)}")

for bad in (
    '{"cluster": {"worker": ["10.0.0.1"]}, "task": {"type": "worker", "index": 0}}',
    '{"cluster": {"worker": ["10.0.0.1:12345"]}, "task": {"type": "worker", "index": 3}}',
):
    try:
        distribute.parse_tf_config(bad)
    except ValueError as error:
        print("rejected:", error)

# %% [markdown]
# ### Running it
#
# On each machine, the same command with its own `TF_CONFIG` (only the task index
# differs). The global `--batch-size` is split over all GPUs of all workers; put
# `--checkpoint-dir` and `--logdir` on storage every worker can reach (the chief
# writes, the others need a path too):
#
# ```bash
# # machine 10.0.0.1 (the chief)
# export TF_CONFIG='{"cluster": {"worker": ["10.0.0.1:12345", "10.0.0.2:12345"]},
#                    "task": {"type": "worker", "index": 0}}'
# tfnorm train --task majority --strategy auto --batch-size 512 \
#     --logdir /shared/runs/mw --checkpoint-dir /shared/ckpt/mw
#
# # machine 10.0.0.2: the same, with "index": 1
# ```
#
# To try it on one machine, start two processes with `127.0.0.1` and two free
# ports (add `--devices /cpu:0` to each without GPUs). Notes:
#
# * the port must be open between the machines (and in the container: publish it,
#   or use the host network);
# * all workers must start: the first collective operation waits for every worker
#   listed in `TF_CONFIG`;
# * if a worker dies, the others stop; re-running the same commands resumes from
#   the chief's last checkpoint;
# * on Kubernetes, the launcher (e.g. Kubeflow's training operator) writes
#   `TF_CONFIG` for you; with SLURM, build it from `SLURM_JOB_NODELIST` and
#   `SLURM_PROCID`.

# ruff: noqa: E402
# Source of notebooks/02_pre_vs_post_ln.ipynb (see tools/make_notebooks.py).

# %% [markdown]
# # Post-LN vs Pre-LN: where the norm goes decides whether you need warm-up
#
# The original Transformer normalises **after** each residual add (Post-LN):
# `x = N(x + F(x))`. Most recent models normalise the input of each sublayer instead
# (Pre-LN): `x = x + F(N(x))`. Xiong et al. (2020, [arXiv 2002.04745](
# https://arxiv.org/abs/2002.04745)) show why this matters: at initialisation the
# gradients of a Post-LN stack's top layers are large and do **not** shrink with
# depth, so a large learning rate from step 0 throws it off; a learning-rate
# warm-up is what makes Post-LN trainable. Pre-LN's gradients shrink like
# `1/sqrt(L)` and it trains without warm-up.
#
# This notebook measures both claims with tfnorm's encoder:
#
# 1. the per-layer gradient norms at initialisation, for all four norm positions
#    tfnorm implements (`post`, `pre`, `sandwich`, `deepnorm`);
# 2. training curves of Post-LN and Pre-LN, with and without warm-up
#    (`tfnorm.experiments.compare_experiment.run_comparison`, the code behind `tfnorm compare`),
#    plus Sandwich-LN and DeepNorm without warm-up.
#
# The parameters below are small so that the notebook runs in about two minutes on
# 2 CPU cores; with one seed the picture is noisier than with several.

# %% tags=["parameters"]
# Small defaults for 2 CPU cores. For a clearer picture (on a GPU, or with time):
# SEEDS = (0, 1, 2), STEPS = 300, WARMUP_STEPS = 60, GRADIENT_SEEDS = (0, 1, 2, 3, 4),
# NUM_LAYERS = 6 (or 12 with LEARNING_RATE = 1e-3, where Post-LN needs a longer
# warm-up still).
NUM_LAYERS = 6  # depth of the trained encoders
STEPS = 150  # training steps per run
WARMUP_STEPS = 40  # linear warm-up of the "with warm-up" runs (at most 30% of STEPS)
LEARNING_RATE = 1e-2  # peak learning rate (Adam)
SEEDS = (0,)
GRADIENT_LAYERS = 12  # depth of the stacks measured at initialisation
GRADIENT_SEEDS = (0,)
# ../runs from the notebook's folder: /workspace/runs in the container, which
# its TensorBoard service watches.
OUTPUT_DIR = "../runs/pre_vs_post_ln"

# %%
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import time

import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf
from IPython.display import Markdown, display

import tfnorm
from tfnorm.experiments import compare_experiment as compare
from tfnorm.experiments.gradients import ffn_gradient_norms_at_init

POSITIONS = ("post", "pre", "sandwich", "deepnorm")
COLOURS = {
    "post": "#d62728",
    "pre": "#1f77b4",
    "sandwich": "#2ca02c",
    "deepnorm": "#9467bd",
}
print("TensorFlow", tf.__version__, "| tfnorm", tfnorm.__version__)

# %% [markdown]
# ## 1. Gradient norms at initialisation (Xiong et al., Theorem 1)
#
# `ffn_gradient_norms_at_init` builds a `GRADIENT_LAYERS`-deep encoder with fresh
# weights, feeds random inputs, projects the output onto a random vocabulary and
# takes the cross-entropy against random targets (a language-model-like loss, as in
# the paper). It returns the gradient norm of each block's second FFN kernel.
#
# What to look for in the plot:
#
# * **Pre-LN** falls from the first layer to the last: each block adds to a residual
#   stream that keeps growing, so the top blocks' contribution, and their gradient,
#   is diluted by depth.
# * **Post-LN** stays roughly flat (or rises toward the top): the top layers get
#   gradients as large as the bottom ones, at any depth. With Adam's
#   normalised steps and a large learning rate, that is what destabilises
#   early training.
# * **Sandwich-LN** shares Pre-LN's residual path, so expect a Pre-LN-like profile.
#   **DeepNorm** is Post-LN with an up-weighted residual and down-scaled initial
#   weights: compare its profile and its level with Post-LN's.

# %%
started = time.time()
init_norms = {
    position: np.array(
        [
            ffn_gradient_norms_at_init(GRADIENT_LAYERS, position, seed=seed)
            for seed in GRADIENT_SEEDS
        ]
    )
    for position in POSITIONS
}
print(f"measured in {time.time() - started:.0f} s")

layers = np.arange(1, GRADIENT_LAYERS + 1)
figure, ax = plt.subplots(figsize=(7, 4))
for position, norms in init_norms.items():
    for seed_norms in norms:
        ax.plot(layers, seed_norms, color=COLOURS[position], alpha=0.25, lw=1)
    ax.plot(layers, norms.mean(0), "o-", color=COLOURS[position], label=f"{position}")
ax.set(
    yscale="log",
    xlabel="layer (1 = bottom)",
    ylabel="gradient norm of the FFN output kernel",
    title=f"At initialisation, {GRADIENT_LAYERS} layers (thin: single seeds)",
)
ax.grid(alpha=0.3)
ax.legend()
plt.show()

for position, norms in init_norms.items():
    ratio = norms[:, -1] / norms[:, 0]
    print(f"{position:9s} last layer / first layer: {np.round(ratio, 2)} (per seed)")

# %% [markdown]
# ## 2. Training: Post-LN vs Pre-LN, with and without warm-up
#
# `run_comparison` trains each of Post-LN and Pre-LN with a constant learning rate,
# once without warm-up and once after a linear warm-up of `WARMUP_STEPS` steps that
# ends early (then the peak rate is held), plus a control: Post-LN without warm-up at
# a constant rate equal to the warm-up run's mean rate, which tells "warm-up helps"
# apart from "a lower learning rate helps". The task needs attention across the whole sequence: **reverse** the input
# tokens (vocabulary of 10, length 12, fresh random batches every step; token
# accuracy is measured on a fixed evaluation set, chance = 0.1). It writes a table,
# a CSV/JSON of every run, a PNG and TensorBoard logs (scalars, and histograms of
# every norm layer's outputs under each run's `norms/`) into `OUTPUT_DIR`; the same
# experiment runs from a shell as `tfnorm compare`.

# %%
started = time.time()
result = compare.run_comparison(
    OUTPUT_DIR,
    num_layers=NUM_LAYERS,
    steps=STEPS,
    warmup_steps=WARMUP_STEPS,
    learning_rate=LEARNING_RATE,
    seeds=SEEDS,
)
print(f"trained {len(result['runs'])} runs in {time.time() - started:.0f} s")
display(Markdown(open(result["paths"]["markdown"]).read()))

# %% [markdown]
# ### Sandwich-LN and DeepNorm
#
# The same model, task and optimizer (Adam, β₂ = 0.98, no gradient clipping — clipping
# would hide the instability we are looking for), without warm-up only:
# `variant_settings` picks the (norm position, warm-up steps) pairs to train. The
# two positions were proposed to make deep stacks train stably, so without warm-up
# they should behave like Pre-LN rather than like Post-LN.

# %%
started = time.time()
extra = compare.run_comparison(
    os.path.join(OUTPUT_DIR, "sandwich_deepnorm"),
    variant_settings=[("sandwich", 0), ("deepnorm", 0)],
    num_layers=NUM_LAYERS,
    steps=STEPS,
    learning_rate=LEARNING_RATE,
    seeds=SEEDS,
)
extra_runs = extra["runs"]
print(f"trained {len(extra_runs)} runs in {time.time() - started:.0f} s")
display(Markdown(open(extra["paths"]["markdown"]).read()))

# %% [markdown]
# ### The curves
#
# Solid lines: no warm-up; dashed: with warm-up. Losses are smoothed over 10 steps.


# %%
def smooth(values, window=10):
    values = np.asarray(values)
    window = max(1, min(window, len(values)))
    return np.arange(window, len(values) + 1), np.convolve(
        values, np.ones(window) / window, mode="valid"
    )


figure, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(13, 4.2))
labelled = set()
for run in result["runs"] + extra_runs:
    # Dashed: warm-up; dotted: the control at a lower constant rate.
    if run["warmup_steps"]:
        style = "--"
    else:
        style = ":" if run["learning_rate"] != LEARNING_RATE else "-"
    label = None if run["variant"] in labelled else run["variant"]
    labelled.add(run["variant"])
    colour = COLOURS[run["norm_position"]]
    loss_ax.plot(*smooth(run["losses"]), style, color=colour, label=label, lw=1.3)
    acc_ax.plot(
        run["eval_steps"], run["eval_accuracy"], style, color=colour, label=label
    )
acc_ax.axhline(0.1, color="black", lw=0.8, ls=":", label="chance")
acc_ax.axhline(compare.TARGET_ACCURACY, color="grey", lw=0.8, ls=":")
if WARMUP_STEPS < STEPS:
    for ax in (loss_ax, acc_ax):
        ax.axvline(WARMUP_STEPS, color="grey", lw=0.8, alpha=0.5)
loss_ax.set(xlabel="step", ylabel="training cross-entropy", title="training loss")
acc_ax.set(xlabel="step", ylabel="token accuracy", ylim=(0, 1.02), title="evaluation")
for ax in (loss_ax, acc_ax):
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## 3. Reading the result
#
# Compare the outcome of each run, not its exact losses (those differ between
# machines and TensorFlow versions):
#
# * **Pre-LN without warm-up** should leave chance level early and climb toward
#   the 95% line: a large learning rate from step 0 is fine for it.
# * **Post-LN without warm-up** is the run to watch: with the full learning rate
#   from the first step it tends to get stuck near chance (its loss stays near
#   `ln(10) ≈ 2.3`), the failure Xiong et al. explain with the large top-layer
#   gradients of section 1.
# * **Post-LN at the warm-up's mean rate, without warm-up** (the control) should fail
#   like Post-LN without warm-up: the rate it averages is not what rescues Post-LN,
#   the small first steps are.
# * **Post-LN with warm-up** starts slowly (the learning rate is tiny at first) and
#   should then learn: the warm-up keeps the first updates small until the
#   optimizer's statistics settle. The table's *max grad norm, steps 1–N* column
#   shows how much larger Post-LN's early gradients get without it (step 0, at the
#   initial weights, is in its own column).
# * **Sandwich-LN / DeepNorm** without warm-up should look more like Pre-LN than like
#   Post-LN.
#
# With one seed and 150 steps (the defaults here), one run can land on the "wrong"
# side by chance; the table counts seeds for that reason. The calibrated setting
# behind `tfnorm compare` is 3 seeds and 300 steps with a 60-step warm-up (see the
# parameters cell); `tfnorm compare --depths 6 12 18` measures how much warm-up
# Post-LN needs as the stack gets deeper (`docs/experiments.md`).
#
# In practice: with Pre-LN, a short warm-up is still cheap insurance; with
# Post-LN it is not optional (`tfnorm.training.WarmupSchedule`, or
# `tfnorm train --warmup-steps`).
#
# The files written by `run_comparison` (table, JSON with every curve, PNG,
# TensorBoard logs):

# %%
for kind, path in result["paths"].items():
    print(f"{kind:12s} {path}")

"""The Post-LN vs Pre-LN experiment behind `tfnorm compare`.

Xiong et al. (2020) show that at initialisation a Post-LN Transformer's
gradients near the output are large and do not shrink with depth, which makes
a learning-rate warm-up necessary, while Pre-LN's shrink like 1/sqrt(L) and it
trains without warm-up. `run_comparison` measures that claim on a small
synthetic task: each of Post-LN and Pre-LN is trained with and without a
warm-up for a few seeds, and the run reports how many seeds learn the task,
how fast, the largest gradient norm seen, and the per-layer gradient norms at
initialisation.

The task ("reverse") is token-level: the target sequence is the input
reversed, which needs attention across the whole sequence. Fresh random
batches are drawn at every step; token accuracy is measured on a fixed
evaluation set (chance = 1 / vocab_size). The default size was calibrated on
2 CPU cores with 3 seeds: with 6 layers and a peak learning rate of 1e-2,
Post-LN without warm-up stays at chance, Pre-LN reaches 95% token accuracy
within ~100 steps, and Post-LN with a 300-step warm-up within ~150-200. Compare
such outcomes (accuracy reached, steps to 95%) across machines, not exact
losses.

Reference: [Xiong et al., 2020, "On Layer Normalization in the Transformer
Architecture"](https://arxiv.org/abs/2002.04745).
"""

from __future__ import annotations

import csv
import json
import os
import time

import numpy as np

from tfnorm._checks import is_int
from tfnorm._keras import keras, tf
from tfnorm.choices import NORM_POSITIONS
from tfnorm.training.compare_settings import DEFAULTS
from tfnorm.training.optimizers import build_optimizer, make_optimizer, variable_path
from tfnorm.training.schedules import WarmupSchedule

#: Accuracy that counts as "learned the task".
TARGET_ACCURACY = 0.95
#: The window over which the largest gradient norm is reported.
EARLY_STEPS = 200


POSITIONS = ("post", "pre")


def variants(warmup_steps, settings=None):
    """The runs per seed as (name, norm_position, warmup_steps).

    `settings` is a list of (norm_position, warmup_steps) pairs; by default
    each of `POSITIONS` without warm-up and with `warmup_steps` of it.
    """
    if settings is None:
        settings = [(p, s) for p in POSITIONS for s in (0, warmup_steps)]
    return [
        (
            f"{position}-LN, {f'warm-up {steps}' if steps else 'no warm-up'}",
            position,
            steps,
        )
        for position, steps in settings
    ]


def reverse_task(rng, count, seq_len, vocab_size):
    """`count` random token sequences and their reversals, as int32 arrays."""
    tokens = rng.integers(0, vocab_size, size=(count, seq_len)).astype("int32")
    return tokens, tokens[:, ::-1].copy()


def build_model(num_layers, d_model, num_heads, dff, vocab_size, seq_len, **options):
    """Token + position embeddings, a tfnorm encoder, and per-token logits.

    Both embeddings are initialised N(0, 1): with small position embeddings
    neither variant learns the reverse task in a few hundred steps.

    Returns:
        `(model, encoder)`.
    """
    from tfnorm.models import build_encoder
    from tfnorm.models.text_layers import TokenAndPositionEmbedding

    tokens = keras.Input((seq_len,), dtype="int32", name="tokens")
    embedded = TokenAndPositionEmbedding(
        vocab_size,
        seq_len,
        d_model,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=1.0),
        name="embedding",
    )(tokens)
    encoder = build_encoder(
        num_layers,
        d_model,
        num_heads,
        dff,
        dropout_rate=0.0,
        with_padding_mask=False,
        seq_len=seq_len,
        **options,
    )
    logits = keras.layers.Dense(vocab_size, name="logits")(encoder(embedded))
    return keras.Model(tokens, logits, name="reverse_model"), encoder


def _loss(targets, logits):
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=targets, logits=tf.cast(logits, tf.float32)
        )
    )


def layer_gradient_norms(model, encoder, tokens, targets):
    """Gradient norm of each block's feed-forward weights, per block.

    All the FFN's weights of a block together (both kernels and biases) in
    the trained model; `tfnorm.models.gradients.ffn_gradient_norms_at_init` measures
    Xiong et al.'s exact quantity (the second FFN kernel) on a bare encoder.

    Returns:
        A list with one float per encoder block, bottom block first.
    """
    blocks = [layer for layer in encoder.layers if layer.name.startswith("block_")]
    groups = []
    for block in blocks:
        ffn = [v for v in block.trainable_variables if "ffn" in variable_path(v)]
        groups.append(ffn or list(block.trainable_variables))
    flat = [v for group in groups for v in group]
    with tf.GradientTape() as tape:
        loss = _loss(targets, model(tokens, training=True))
    grads = tape.gradient(loss, flat)
    norms, start = [], 0
    for group in groups:
        norms.append(float(tf.linalg.global_norm(grads[start : start + len(group)])))
        start += len(group)
    return norms


class _Trainer:
    """One compiled model per norm position, re-initialised for every run.

    XLA compilation of a training step costs far more than the few hundred
    steps it runs (minutes on a loaded 2-core machine), so every run of one
    norm position reuses one model and one compiled step: a run copies fresh
    seeded weights in, zeroes the optimizer state, and feeds the learning rate
    of its schedule at every step.
    """

    def __init__(self, position, cfg):
        keras.backend.clear_session()
        self.position = position
        self.cfg = cfg
        self.model, self.encoder = self._build()
        # The calibrated setting: Adam with beta_2 0.98, no clipping (clipping
        # hides the Post-LN instability) and no weight decay.
        self.optimizer = make_optimizer(
            "adam", cfg["learning_rate"], beta_2=0.98, epsilon=1e-9
        )
        build_optimizer(self.optimizer, self.model.trainable_variables)
        self.train_step = tf.function(self._train_step, jit_compile=cfg["jit_compile"])
        self.accuracy = tf.function(self._accuracy)

    def _build(self):
        cfg = self.cfg
        return build_model(
            cfg["num_layers"],
            cfg["d_model"],
            cfg["num_heads"],
            cfg["dff"],
            cfg["vocab_size"],
            cfg["seq_len"],
            norm=cfg["norm"],
            norm_position=self.position,
            epsilon=cfg["epsilon"],
        )

    def reset(self, seed):
        keras.utils.set_random_seed(seed)
        fresh, _ = self._build()
        self.model.set_weights(fresh.get_weights())
        variables = self.optimizer.variables
        for variable in variables() if callable(variables) else variables:
            variable.assign(tf.zeros_like(variable))

    def _train_step(self, tokens, targets):
        model = self.model
        with tf.GradientTape() as tape:
            loss = _loss(targets, model(tokens, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss, tf.linalg.global_norm(grads)

    def _accuracy(self, tokens, targets):
        logits = self.model(tokens, training=False)
        predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return tf.reduce_mean(tf.cast(tf.equal(predicted, targets), tf.float32))


def _train_one(trainer, name, warmup_steps, seed, eval_data, logdir, log):
    cfg = trainer.cfg
    trainer.reset(seed)
    eval_tokens, eval_targets = eval_data
    init_norms = layer_gradient_norms(
        trainer.model, trainer.encoder, eval_tokens[:256], eval_targets[:256]
    )
    schedule = WarmupSchedule(cfg["learning_rate"], warmup_steps, decay="constant")
    rates = schedule(np.arange(cfg["steps"])).numpy()
    train_step, accuracy = trainer.train_step, trainer.accuracy
    rng = np.random.default_rng(10_000 + seed)
    writer = tf.summary.create_file_writer(os.path.join(logdir, _slug(name, seed)))
    losses, grad_norms, evals = [], [], []
    started = time.time()
    with writer.as_default():
        for step in range(cfg["steps"]):
            tokens, targets = reverse_task(
                rng, cfg["batch_size"], cfg["seq_len"], cfg["vocab_size"]
            )
            rate = float(rates[step])
            trainer.optimizer.learning_rate = rate
            loss, grad_norm = train_step(tf.constant(tokens), tf.constant(targets))
            losses.append(float(loss))
            grad_norms.append(float(grad_norm))
            tf.summary.scalar("loss", losses[-1], step=step)
            tf.summary.scalar("gradient_norm", grad_norms[-1], step=step)
            tf.summary.scalar("learning_rate", rate, step=step)
            done = step + 1
            if done % cfg["eval_every"] == 0 or done == cfg["steps"]:
                acc = float(accuracy(eval_tokens, eval_targets))
                evals.append((done, acc))
                tf.summary.scalar("eval_token_accuracy", acc, step=step)
        for layer, norm in enumerate(init_norms):
            tf.summary.scalar("init_ffn_gradient_norm", norm, step=layer)
    writer.close()
    seconds = time.time() - started
    reached = next((s for s, acc in evals if acc >= TARGET_ACCURACY), None)
    log(
        f"  {name:<24} seed {seed}: final accuracy {evals[-1][1]:.3f}, "
        f"steps to {TARGET_ACCURACY:.0%}: {reached or '-'}, "
        f"{1000 * seconds / cfg['steps']:.0f} ms/step"
    )
    return {
        "variant": name,
        "norm_position": trainer.position,
        "warmup_steps": warmup_steps,
        "seed": seed,
        "losses": losses,
        "gradient_norms": grad_norms,
        "eval_steps": [s for s, _ in evals],
        "eval_accuracy": [a for _, a in evals],
        "final_accuracy": evals[-1][1],
        "steps_to_target": reached,
        "max_gradient_norm_early": max(grad_norms[:EARLY_STEPS]),
        "init_layer_gradient_norms": init_norms,
        "seconds": seconds,
    }


def _slug(name, seed):
    return (
        name.replace("-LN, ", "_").replace("warm-up ", "warmup").replace(" ", "_")
        + f"_seed{seed}"
    ).replace("-", "")


def summarise(runs, variant_names):
    """One summary row per variant, aggregated over seeds."""
    rows = []
    for name in variant_names:
        mine = [r for r in runs if r["variant"] == name]
        if not mine:
            continue
        reached = [
            r["steps_to_target"] for r in mine if r["steps_to_target"] is not None
        ]
        final = [r["final_accuracy"] for r in mine]
        init = np.array([r["init_layer_gradient_norms"] for r in mine])
        rows.append(
            {
                "variant": name,
                "norm_position": mine[0]["norm_position"],
                "warmup_steps": mine[0]["warmup_steps"],
                "seeds": len(mine),
                "seeds_reaching_target": len(reached),
                "median_steps_to_target": float(np.median(reached))
                if reached
                else None,
                "final_accuracy_mean": float(np.mean(final)),
                "final_accuracy_min": float(np.min(final)),
                "final_accuracy_max": float(np.max(final)),
                "max_gradient_norm_early": float(
                    max(r["max_gradient_norm_early"] for r in mine)
                ),
                "init_gradient_last_over_first": float(
                    np.mean(init[:, -1] / init[:, 0])
                ),
            }
        )
    return rows


def markdown_table(rows, steps):
    header = (
        f"| variant | seeds reaching {TARGET_ACCURACY:.0%} | median steps to {TARGET_ACCURACY:.0%} | "
        f"final accuracy mean (min–max) | max grad norm, first {min(EARLY_STEPS, steps)} steps | "
        "init grad last/first layer |"
    )
    lines = [header, "|" + "---|" * 6]
    for row in rows:
        median = row["median_steps_to_target"]
        lines.append(
            f"| {row['variant']} | {row['seeds_reaching_target']}/{row['seeds']} | "
            f"{'-' if median is None else f'{median:.0f}'} | "
            f"{row['final_accuracy_mean']:.3f} ({row['final_accuracy_min']:.3f}–"
            f"{row['final_accuracy_max']:.3f}) | {row['max_gradient_norm_early']:.2f} | "
            f"{row['init_gradient_last_over_first']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def plot(runs, rows, path, smooth=10, chance=None):
    """Writes the figure: loss curves, accuracy curves, per-layer gradients at init."""
    # A bare Figure, not pyplot: the global backend (e.g. a notebook's inline
    # one) stays as the caller set it.
    import matplotlib.ticker
    from matplotlib.figure import Figure

    colours = {}
    palette = ["#d62728", "#ff7f0e", "#1f77b4", "#2ca02c"]
    for index, row in enumerate(rows):
        colours[row["variant"]] = palette[index % len(palette)]
    figure = Figure(figsize=(16, 4.6))
    loss_ax, acc_ax, grad_ax = figure.subplots(1, 3)
    for run in runs:
        colour = colours[run["variant"]]
        losses = np.asarray(run["losses"])
        window = max(1, min(smooth, len(losses)))
        smoothed = np.convolve(losses, np.ones(window) / window, mode="valid")
        label = (
            run["variant"]
            if run["seed"]
            == min(r["seed"] for r in runs if r["variant"] == run["variant"])
            else None
        )
        loss_ax.plot(
            np.arange(window, len(losses) + 1),
            smoothed,
            color=colour,
            alpha=0.8,
            lw=1.2,
            label=label,
        )
        acc_ax.plot(
            run["eval_steps"],
            run["eval_accuracy"],
            color=colour,
            alpha=0.8,
            lw=1.2,
            label=label,
        )
    loss_ax.set(
        title="training loss (moving average)", xlabel="step", ylabel="cross-entropy"
    )
    acc_ax.axhline(TARGET_ACCURACY, color="grey", ls=":", lw=1)
    if chance is not None:
        acc_ax.axhline(chance, color="black", ls="--", lw=0.8, label="chance")
    acc_ax.set(
        title="eval token accuracy", xlabel="step", ylabel="accuracy", ylim=(0, 1.02)
    )
    # Weights at initialisation do not depend on the warm-up: one curve per
    # position, from its runs without warm-up.
    for row in rows:
        if row["warmup_steps"]:
            continue
        position = row["norm_position"]
        init = [
            r["init_layer_gradient_norms"]
            for r in runs
            if r["variant"] == row["variant"]
        ]
        colour = colours[row["variant"]]
        init = np.asarray(init)
        layers = np.arange(1, init.shape[1] + 1)
        for seed_norms in init:
            grad_ax.plot(layers, seed_norms, color=colour, alpha=0.25, lw=1)
        grad_ax.plot(
            layers,
            init.mean(axis=0),
            color=colour,
            marker="o",
            lw=2,
            label=f"{position}-LN (mean over seeds)",
        )
    grad_ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    grad_ax.set(
        title="FFN gradient norm at initialisation",
        xlabel="layer",
        ylabel="gradient norm",
        yscale="log",
    )
    for ax in (loss_ax, acc_ax, grad_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def _check_variant_settings(settings):
    if settings is None:
        return
    valid = bool(settings) and all(
        isinstance(pair, (list, tuple))
        and len(pair) == 2
        and pair[0] in NORM_POSITIONS
        and is_int(pair[1])
        and pair[1] >= 0
        for pair in settings
    )
    if not valid:
        raise ValueError(
            "`variant_settings` must be a non-empty list of (norm_position, "
            f"warmup_steps) pairs, norm_position one of {NORM_POSITIONS} and "
            f"warmup_steps an integer >= 0. Received: variant_settings={settings!r}"
        )


def run_comparison(output_dir, log=print, variant_settings=None, **overrides):
    """Runs the Post-LN vs Pre-LN experiment and writes its results.

    Every combination of Post-LN/Pre-LN and no warm-up/`warmup_steps` warm-up
    (or the variants `variant_settings` names) is trained for each seed on the
    "reverse" task with a constant learning rate after the (optional) linear
    warm-up.

    Writes into `output_dir`:

    * `results.md` and `results.csv`: the table, one row per variant (seeds
      reaching 95% token accuracy, median steps to get there, final accuracy,
      the largest gradient norm in the first 200 steps, and the ratio of the
      last to the first layer's FFN gradient norm at initialisation);
    * `results.json`: the configuration, the table and every run's curves;
    * `comparison.png`: loss curves, accuracy curves and the per-layer
      gradient norms at initialisation;
    * `tensorboard/<variant>_seed<k>/`: the scalars per step.

    Example:

    >>> from tfnorm.training.compare import run_comparison
    >>> result = run_comparison("runs/compare", num_layers=2, steps=20, seeds=(0,))

    Args:
        output_dir: directory to write into (created if needed).
        log: function called with one progress line at a time. Defaults to
            `print`.
        variant_settings: list of `(norm_position, warmup_steps)` pairs to
            train instead of the default four, e.g.
            `[("sandwich", 0), ("deepnorm", 0)]`.
        **overrides: any key of `DEFAULTS`: `num_layers`, `d_model`,
            `num_heads`, `dff`, `vocab_size`, `seq_len`, `batch_size`,
            `steps`, `learning_rate` (peak), `warmup_steps`, `seeds`, `norm`
            (a `tfnorm.get_norm` name), `epsilon`, `eval_size`, `eval_every`,
            `jit_compile`.

    Returns:
        A dict with `config`, `table` (the summary rows), `runs` and `paths`.
    """
    unknown = sorted(set(overrides) - set(DEFAULTS))
    if unknown:
        raise ValueError(
            f"Unknown option(s) {unknown}. Choose from {sorted(DEFAULTS)}."
        )
    cfg = dict(DEFAULTS)
    cfg.update(overrides)
    cfg["seeds"] = [int(s) for s in cfg["seeds"]]
    for key in (
        "num_layers",
        "d_model",
        "num_heads",
        "dff",
        "vocab_size",
        "seq_len",
        "batch_size",
        "steps",
        "eval_size",
        "eval_every",
    ):
        if int(cfg[key]) < 1:
            raise ValueError(f"`{key}` must be >= 1. Received: {key}={cfg[key]!r}")
    if not cfg["seeds"]:
        raise ValueError(
            f"`seeds` must name at least one seed. Received: seeds={cfg['seeds']!r}"
        )
    if cfg["warmup_steps"] < 1:
        raise ValueError(
            "`warmup_steps` must be >= 1: the experiment compares with and "
            f"without warm-up. Received: warmup_steps={cfg['warmup_steps']!r}"
        )
    _check_variant_settings(variant_settings)
    os.makedirs(output_dir, exist_ok=True)
    logdir = os.path.join(output_dir, "tensorboard")
    eval_data = reverse_task(
        np.random.default_rng(12_345),
        cfg["eval_size"],
        cfg["seq_len"],
        cfg["vocab_size"],
    )
    names = variants(cfg["warmup_steps"], variant_settings)
    log(
        f"Post-LN vs Pre-LN on the reverse task: {cfg['num_layers']} layers, "
        f"d_model {cfg['d_model']}, {cfg['steps']} steps, peak lr "
        f"{cfg['learning_rate']}, seeds {cfg['seeds']}"
    )
    runs = []
    for position in dict.fromkeys(p for _, p, _ in names):
        trainer = _Trainer(position, cfg)
        for seed in cfg["seeds"]:
            for name, warmup in [(n, w) for n, p, w in names if p == position]:
                runs.append(
                    _train_one(trainer, name, warmup, seed, eval_data, logdir, log)
                )
    # Report in the table's order whatever order the runs ran in.
    order = {name: i for i, (name, _, _) in enumerate(names)}
    runs.sort(key=lambda run: (order[run["variant"]], run["seed"]))
    rows = summarise(runs, [n for n, _, _ in names])
    paths = {
        "markdown": os.path.join(output_dir, "results.md"),
        "csv": os.path.join(output_dir, "results.csv"),
        "json": os.path.join(output_dir, "results.json"),
        "plot": os.path.join(output_dir, "comparison.png"),
        "tensorboard": logdir,
    }
    with open(paths["markdown"], "w") as f:
        f.write(markdown_table(rows, cfg["steps"]))
    with open(paths["csv"], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    result = {"config": cfg, "table": rows, "runs": runs, "paths": paths}
    with open(paths["json"], "w") as f:
        json.dump(result, f, indent=1)
    plot(runs, rows, paths["plot"], chance=1.0 / cfg["vocab_size"])
    return result

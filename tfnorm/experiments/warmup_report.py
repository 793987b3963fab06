"""The tables and the figure of the warm-up experiment (`tfnorm.experiments.warmup`).

Kept apart from the runs so that the report can be redrawn from
`runs.json` without training anything.
"""

from __future__ import annotations

import numpy as np

#: Accuracy that counts as "learned the task".
TARGET_ACCURACY = 0.95
#: The window over which the largest gradient norm is reported.
EARLY_STEPS = 200


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

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
    from matplotlib.figure import Figure

    palette = ["#d62728", "#ff7f0e", "#1f77b4", "#2ca02c"]
    colours = {
        row["variant"]: palette[index % len(palette)] for index, row in enumerate(rows)
    }
    figure = Figure(figsize=(16, 4.6))
    loss_ax, acc_ax, grad_ax = figure.subplots(1, 3)
    _plot_losses(loss_ax, runs, colours, smooth)
    _plot_accuracy(acc_ax, runs, colours, chance)
    _plot_init_gradients(grad_ax, runs, rows, colours)
    for ax in (loss_ax, acc_ax, grad_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def _legend_label(run, runs):
    # One legend entry per variant: its run with the lowest seed.
    first_seed = min(r["seed"] for r in runs if r["variant"] == run["variant"])
    return run["variant"] if run["seed"] == first_seed else None


def _plot_losses(ax, runs, colours, smooth):
    for run in runs:
        losses = np.asarray(run["losses"])
        window = max(1, min(smooth, len(losses)))
        smoothed = np.convolve(losses, np.ones(window) / window, mode="valid")
        ax.plot(
            np.arange(window, len(losses) + 1),
            smoothed,
            color=colours[run["variant"]],
            alpha=0.8,
            lw=1.2,
            label=_legend_label(run, runs),
        )
    ax.set(
        title="training loss (moving average)", xlabel="step", ylabel="cross-entropy"
    )


def _plot_accuracy(ax, runs, colours, chance):
    for run in runs:
        ax.plot(
            run["eval_steps"],
            run["eval_accuracy"],
            color=colours[run["variant"]],
            alpha=0.8,
            lw=1.2,
            label=_legend_label(run, runs),
        )
    ax.axhline(TARGET_ACCURACY, color="grey", ls=":", lw=1)
    if chance is not None:
        ax.axhline(chance, color="black", ls="--", lw=0.8, label="chance")
    ax.set(
        title="eval token accuracy", xlabel="step", ylabel="accuracy", ylim=(0, 1.02)
    )


def _plot_init_gradients(ax, runs, rows, colours):
    import matplotlib.ticker

    # Weights at initialisation do not depend on the warm-up: one curve per
    # position, from its runs without warm-up.
    for row in rows:
        if row["warmup_steps"]:
            continue
        colour = colours[row["variant"]]
        init = np.asarray(
            [
                r["init_layer_gradient_norms"]
                for r in runs
                if r["variant"] == row["variant"]
            ]
        )
        layers = np.arange(1, init.shape[1] + 1)
        for seed_norms in init:
            ax.plot(layers, seed_norms, color=colour, alpha=0.25, lw=1)
        ax.plot(
            layers,
            init.mean(axis=0),
            color=colour,
            marker="o",
            lw=2,
            label=f"{row['norm_position']}-LN (mean over seeds)",
        )
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set(
        title="FFN gradient norm at initialisation",
        xlabel="layer",
        ylabel="gradient norm",
        yscale="log",
    )

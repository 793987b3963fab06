"""The plots the compare experiment's two reports share (`compare_report`
for the encoder tasks, `compare_lm_report` for the language model): one
four-panel figure, with each report's own second panel."""

from __future__ import annotations

import numpy as np

#: The early phase: the largest gradient norm of steps 1 to this is reported
#: (step 0, at the initial weights, has its own column).
EARLY_STEPS = 100

#: One colour per variant, in the order of the summary's rows.
PALETTE = [
    "#d62728",
    "#ff7f0e",
    "#9467bd",
    "#1f77b4",
    "#2ca02c",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#7f7f7f",
    "#bcbd22",
]


def early_label(steps):
    """The column and legend title of the early gradient norms."""
    return f"max grad norm, steps 1–{min(EARLY_STEPS, max(steps - 1, 1))}"


def save_figure(path, runs, rows, second_panel, smooth=10, legend_size=8):
    """Writes the four panels to `path`: training loss, `second_panel(ax,
    colours)` (the report's held-out measure), early gradient norms and the
    per-layer gradient norms at initialisation."""
    # A bare Figure, not pyplot: the global backend (e.g. a notebook's inline
    # one) stays as the caller set it.
    from matplotlib.figure import Figure

    colours = {
        row["variant"]: PALETTE[index % len(PALETTE)] for index, row in enumerate(rows)
    }
    figure = Figure(figsize=(21, 4.6))
    loss_ax, second_ax, early_ax, grad_ax = figure.subplots(1, 4)
    plot_losses(loss_ax, runs, colours, smooth)
    second_panel(second_ax, colours)
    plot_early_gradients(early_ax, runs, colours)
    plot_init_gradients(grad_ax, runs, rows, colours)
    for ax in (loss_ax, second_ax, early_ax, grad_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=legend_size)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def legend_label(run, runs):
    # One legend entry per variant: its run with the lowest seed.
    first_seed = min(r["seed"] for r in runs if r["variant"] == run["variant"])
    return run["variant"] if run["seed"] == first_seed else None


def plot_losses(ax, runs, colours, smooth):
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
            label=legend_label(run, runs),
        )
    ax.set(
        title="training loss (moving average)", xlabel="step", ylabel="cross-entropy"
    )


def plot_accuracy(ax, runs, colours, chance, target):
    for run in runs:
        ax.plot(
            run["eval_steps"],
            run["eval_accuracy"],
            color=colours[run["variant"]],
            alpha=0.8,
            lw=1.2,
            label=legend_label(run, runs),
        )
    if target is not None:
        ax.axhline(target, color="grey", ls=":", lw=1)
    if chance is not None:
        ax.axhline(chance, color="black", ls="--", lw=0.8, label="chance")
    ax.set(title="held-out accuracy", xlabel="step", ylabel="accuracy", ylim=(0, 1.02))


def plot_early_gradients(ax, runs, colours):
    # Steps 1 to EARLY_STEPS: step 0 is at the initial weights, the same for
    # every variant of a seed, and would only set the scale.
    for run in runs:
        norms = np.asarray(run["gradient_norms"][1 : EARLY_STEPS + 1])
        ax.plot(
            np.arange(1, len(norms) + 1),
            norms,
            color=colours[run["variant"]],
            alpha=0.7,
            lw=1,
            label=legend_label(run, runs),
        )
    ax.set(
        title=f"global gradient norm, steps 1–{EARLY_STEPS}",
        xlabel="step",
        ylabel="gradient norm",
        yscale="log",
    )


def plot_init_gradients(ax, runs, rows, colours):
    import matplotlib.ticker

    # Weights at initialisation do not depend on the warm-up or the rate:
    # one curve per position, from its first variant.
    drawn = set()
    for row in rows:
        if row["norm_position"] in drawn:
            continue
        drawn.add(row["norm_position"])
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

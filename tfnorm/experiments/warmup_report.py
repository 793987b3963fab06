"""The tables and the figure of the warm-up experiment (`tfnorm.experiments.warmup`).

Kept apart from the runs so that the report can be redrawn from
`results.json` without training anything.
"""

from __future__ import annotations

import numpy as np

from tfnorm.experiments.layer_gradients import spread_over_seeds

#: Accuracy that counts as "learned the task" on the reverse task.
TARGET_ACCURACY = 0.95
#: The early phase: the largest gradient norm of steps 1 to this is reported
#: (step 0, at the initial weights, has its own column).
EARLY_STEPS = 100


def summarise(runs, variant_names):
    """One summary row per variant, aggregated over seeds."""
    rows = []
    for name in variant_names:
        mine = [r for r in runs if r["variant"] == name]
        init = np.array([r["init_layer_gradient_norms"] for r in mine])
        first = mine[0]
        rows.append(
            {
                "variant": name,
                "norm_position": first["norm_position"],
                "learning_rate": first["learning_rate"],
                "mean_learning_rate": first["mean_learning_rate"],
                "warmup_steps": first["warmup_steps"],
                "steps": first["steps"],
                **over_seeds(mine),
                "final_eval_loss_mean": float(
                    np.mean([r["final_eval_loss"] for r in mine])
                ),
                "gradient_norm_step0": float(
                    np.mean([r["gradient_norm_step0"] for r in mine])
                ),
                "max_gradient_norm_early": float(
                    max(r["max_gradient_norm_early"] for r in mine)
                ),
                "init_gradient_last_over_first": float(
                    np.mean(init[:, -1] / init[:, 0])
                ),
                **spread_over_seeds(mine),
            }
        )
    return rows


def over_seeds(runs):
    """What the tables say of one variant's `runs`, one per seed: how many,
    how many reached the target and the median step they did, and the final
    accuracy's mean, min and max."""
    reached = [r["steps_to_target"] for r in runs if r["steps_to_target"] is not None]
    final = [r["final_accuracy"] for r in runs]
    return {
        "seeds": len(runs),
        "seeds_reaching_target": len(reached),
        "median_steps_to_target": float(np.median(reached)) if reached else None,
        "final_accuracy_mean": float(np.mean(final)),
        "final_accuracy_min": float(np.min(final)),
        "final_accuracy_max": float(np.max(final)),
    }


def _early_label(steps):
    return f"max grad norm, steps 1–{min(EARLY_STEPS, max(steps - 1, 1))}"


def markdown_table(rows, target=TARGET_ACCURACY):
    """The summary table; without a `target` (mlm) the steps-to-target columns go."""
    reach = (
        [f"seeds reaching {target:.0%}", f"median steps to {target:.0%}"]
        if target is not None
        else []
    )
    columns = (
        ["variant", "peak lr", "mean lr", "warm-up / steps"]
        + reach
        + [
            "final accuracy mean (min–max)",
            "held-out loss",
            "grad norm at step 0 (mean)",
            _early_label(rows[0]["steps"]),
            "init grad last/first layer",
            "layer grad variance: across layers / over time",
        ]
    )
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        median = row["median_steps_to_target"]
        cells = [
            row["variant"],
            f"{row['learning_rate']:.3g}",
            f"{row['mean_learning_rate']:.3g}",
            f"{row['warmup_steps']} / {row['steps']}",
        ]
        if target is not None:
            cells += [
                f"{row['seeds_reaching_target']}/{row['seeds']}",
                "-" if median is None else f"{median:.0f}",
            ]
        cells += [
            f"{row['final_accuracy_mean']:.3f} ({row['final_accuracy_min']:.3f}–"
            f"{row['final_accuracy_max']:.3f})",
            f"{row['final_eval_loss_mean']:.3f}",
            f"{row['gradient_norm_step0']:.2f}",
            f"{row['max_gradient_norm_early']:.2f}",
            f"{row['init_gradient_last_over_first']:.2f}",
            _spread_cell(row),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _spread_cell(row):
    across = row.get("layer_gradient_variance_across_layers")
    if across is None:
        return "-"
    return f"{across:.3g} / {row['layer_gradient_variance_over_time']:.3g}"


def per_seed_table(runs, target=TARGET_ACCURACY):
    """One row per run: every variant, every seed."""
    reach = [f"steps to {target:.0%}"] if target is not None else []
    columns = (
        ["variant", "seed"]
        + reach
        + [
            "final accuracy",
            "held-out loss",
            "grad norm, step 0",
            _early_label(runs[0]["steps"]),
        ]
    )
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for run in runs:
        cells = [run["variant"], str(run["seed"])]
        if target is not None:
            cells.append(str(run["steps_to_target"] or "-"))
        cells += [
            f"{run['final_accuracy']:.3f}",
            f"{run['final_eval_loss']:.3f}",
            f"{run['gradient_norm_step0']:.2f}",
            f"{run['max_gradient_norm_early']:.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(runs, rows, path, smooth=10, chance=None, target=TARGET_ACCURACY):
    """Writes the figure: loss curves, accuracy curves, per-layer gradients at init."""
    # A bare Figure, not pyplot: the global backend (e.g. a notebook's inline
    # one) stays as the caller set it.
    from matplotlib.figure import Figure

    palette = ["#d62728", "#ff7f0e", "#9467bd", "#1f77b4", "#2ca02c", "#8c564b"]
    colours = {
        row["variant"]: palette[index % len(palette)] for index, row in enumerate(rows)
    }
    figure = Figure(figsize=(21, 4.6))
    loss_ax, acc_ax, early_ax, grad_ax = figure.subplots(1, 4)
    _plot_losses(loss_ax, runs, colours, smooth)
    _plot_accuracy(acc_ax, runs, colours, chance, target)
    _plot_early_gradients(early_ax, runs, colours)
    _plot_init_gradients(grad_ax, runs, rows, colours)
    for ax in (loss_ax, acc_ax, early_ax, grad_ax):
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


def _plot_accuracy(ax, runs, colours, chance, target):
    for run in runs:
        ax.plot(
            run["eval_steps"],
            run["eval_accuracy"],
            color=colours[run["variant"]],
            alpha=0.8,
            lw=1.2,
            label=_legend_label(run, runs),
        )
    if target is not None:
        ax.axhline(target, color="grey", ls=":", lw=1)
    if chance is not None:
        ax.axhline(chance, color="black", ls="--", lw=0.8, label="chance")
    ax.set(title="held-out accuracy", xlabel="step", ylabel="accuracy", ylim=(0, 1.02))


def _plot_early_gradients(ax, runs, colours):
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
            label=_legend_label(run, runs),
        )
    ax.set(
        title=f"global gradient norm, steps 1–{EARLY_STEPS}",
        xlabel="step",
        ylabel="gradient norm",
        yscale="log",
    )


def _plot_init_gradients(ax, runs, rows, colours):
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

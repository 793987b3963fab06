"""The tables and the figure of the warm-up experiment (`tfnorm.experiments.compare_experiment`).

Kept apart from the runs so that the report can be redrawn from
`results.json` without training anything.
"""

from __future__ import annotations

import numpy as np

from tfnorm.experiments.figures import (
    early_label,
    plot_accuracy,
    save_figure,
)
from tfnorm.experiments.layer_gradients import spread_over_seeds
from tfnorm.experiments.tables import format_markdown_table

#: Accuracy that counts as "learned the task" on the reverse task.
TARGET_ACCURACY = 0.95


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
            early_label(rows[0]["steps"]),
            "init grad last/first layer",
            "layer grad variance: across layers / over time",
        ]
    )
    table_rows = []
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
        table_rows.append(cells)
    return format_markdown_table(columns, table_rows)


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
            early_label(runs[0]["steps"]),
        ]
    )
    table_rows = []
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
        table_rows.append(cells)
    return format_markdown_table(columns, table_rows)


def plot(runs, rows, path, smooth=10, chance=None, target=TARGET_ACCURACY):
    """Writes the figure: loss curves, accuracy curves, per-layer gradients at init."""

    def accuracy(ax, colours):
        plot_accuracy(ax, runs, colours, chance, target)

    save_figure(path, runs, rows, accuracy, smooth=smooth, legend_size=8)

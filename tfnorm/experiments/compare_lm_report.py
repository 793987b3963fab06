"""The table and the figure of the decoder experiment (`tfnorm compare --task lm`).

The rows come from `compare_report.summarise`, with the columns of a
language model added (`add_lm_columns`): the norm, the held-out bits per
byte over seeds, the median step time, and the steps to the task's
threshold (the bigram model's bits per byte, `tfnorm.experiments.tasks.lm`).
"""

from __future__ import annotations

import math

import numpy as np

from tfnorm.experiments.figures import early_label, legend_label, save_figure
from tfnorm.experiments.tables import format_markdown_table


def add_lm_columns(rows, runs):
    """`rows` (one per variant) with the norm, bits per byte and step time added."""
    for row in rows:
        mine = [r for r in runs if r["variant"] == row["variant"]]
        bits = [r["final_bits_per_byte"] for r in mine]
        row["norm"] = mine[0]["norm"]
        row["final_bits_per_byte_mean"] = float(np.mean(bits))
        row["final_bits_per_byte_min"] = float(np.min(bits))
        row["final_bits_per_byte_max"] = float(np.max(bits))
        row["step_ms_median"] = float(np.median([r["step_ms"] for r in mine]))
    return rows


def baselines_line(task):
    """One sentence: the held-out text and the two baselines."""
    sizes = task.sizes
    return (
        f"Held-out text: {sizes['val_targets']:,} byte tokens, the last "
        f"{sizes['held_out_tokens'] / (sizes['held_out_tokens'] + sizes['train_tokens']):.0%} "
        f"of the stream. Unigram model of the training bytes: "
        f"{sizes['unigram_bits_per_byte']:.3f} bits per byte; bigram: "
        f"{sizes['bigram_bits_per_byte']:.3f} (the threshold).\n"
    )


def markdown_table(rows, task):
    """The summary table, one row per variant."""
    threshold = task.sizes["threshold_bits_per_byte"]
    columns = [
        "variant",
        "norm",
        "peak lr",
        "mean lr",
        "warm-up / steps",
        f"seeds below {threshold:.2f} bits",
        f"median steps to {threshold:.2f} bits",
        "held-out bits per byte mean (min–max)",
        "ms per step (median)",
        "grad norm at step 0 (mean)",
        early_label(rows[0]["steps"]),
        "init grad last/first layer",
    ]
    table_rows = []
    for row in rows:
        median = row["median_steps_to_target"]
        cells = [
            row["variant"],
            row["norm"],
            f"{row['learning_rate']:.3g}",
            f"{row['mean_learning_rate']:.3g}",
            f"{row['warmup_steps']} / {row['steps']}",
            f"{row['seeds_reaching_target']}/{row['seeds']}",
            "-" if median is None else f"{median:.0f}",
            f"{row['final_bits_per_byte_mean']:.3f} "
            f"({row['final_bits_per_byte_min']:.3f}–{row['final_bits_per_byte_max']:.3f})",
            f"{row['step_ms_median']:.1f}",
            f"{row['gradient_norm_step0']:.2f}",
            f"{row['max_gradient_norm_early']:.2f}",
            f"{row['init_gradient_last_over_first']:.2f}",
        ]
        table_rows.append(cells)
    return baselines_line(task) + "\n" + format_markdown_table(columns, table_rows)


def per_seed_table(runs, task):
    """One row per run: every variant, every seed."""
    threshold = task.sizes["threshold_bits_per_byte"]
    columns = [
        "variant",
        "seed",
        f"steps to {threshold:.2f} bits",
        "held-out bits per byte",
        "ms per step",
        "grad norm, step 0",
        early_label(runs[0]["steps"]),
    ]
    table_rows = []
    for run in runs:
        cells = [
            run["variant"],
            str(run["seed"]),
            str(run["steps_to_target"] or "-"),
            f"{run['final_bits_per_byte']:.3f}",
            f"{run['step_ms']:.1f}",
            f"{run['gradient_norm_step0']:.2f}",
            f"{run['max_gradient_norm_early']:.2f}",
        ]
        table_rows.append(cells)
    return format_markdown_table(columns, table_rows)


def plot(runs, rows, path, task, smooth=10):
    """Writes the figure: training loss, held-out bits per byte, early
    gradient norms, per-layer gradients at initialisation."""

    def bits(ax, colours):
        _plot_bits(ax, runs, colours, task)

    save_figure(path, runs, rows, bits, smooth=smooth, legend_size=7)


def _plot_bits(ax, runs, colours, task):
    for run in runs:
        ax.plot(
            run["eval_steps"],
            np.asarray(run["eval_loss"]) / math.log(2.0),
            color=colours[run["variant"]],
            alpha=0.8,
            lw=1.2,
            label=legend_label(run, runs),
        )
    sizes = task.sizes
    ax.axhline(
        sizes["unigram_bits_per_byte"], color="black", ls="--", lw=0.8, label="unigram"
    )
    ax.axhline(
        sizes["bigram_bits_per_byte"],
        color="grey",
        ls=":",
        lw=1,
        label="bigram (threshold)",
    )
    top = max(sizes["unigram_bits_per_byte"] + 1.0, 4.0)
    ax.set(
        title="held-out bits per byte",
        xlabel="step",
        ylabel="bits per byte",
        ylim=(0, top),
    )

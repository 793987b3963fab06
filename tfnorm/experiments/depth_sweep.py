"""How much warm-up Post-LN needs as depth grows, and Pre-LN without any.

Xiong et al. (2020) predict that Post-LN's need for warm-up grows with depth
while Pre-LN trains without warm-up at any depth. `run_sweep` measures it:
for each depth of `cfg.depths` it trains Post-LN with a linear warm-up of
each fraction of `cfg.sweep_warmups` (0 = none; then the peak rate held) and
Pre-LN without warm-up, for each of `cfg.sweep_seeds`, at the peak rate
`cfg.learning_rate`, on the experiment's task. `tfnorm compare --depths 6 12
18` runs it after the main comparison.

Writes `sweep.md` (one row per depth: each warm-up's outcome), `sweep.json`
(every run's curves) and `sweep.png` (final accuracy against warm-up length,
one line per depth, Pre-LN without warm-up as a star just left of 0).
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from tfnorm.experiments.compare_report import over_seeds
from tfnorm.experiments.compare_runs import PositionTrainer, train_run
from tfnorm.experiments.tables import format_markdown_table


def sweep_variants(cfg):
    """The sweep's runs per depth and seed: Post-LN at each warm-up, Pre-LN without."""
    chosen = []
    for fraction in cfg.sweep_warmups:
        warmup = int(round(fraction * cfg.steps))
        chosen.append(_variant("post", warmup, cfg.learning_rate))
    chosen.append(_variant("pre", 0, cfg.learning_rate))
    # Two fractions rounding to the same length are one run.
    return list({v["name"]: v for v in chosen}.values())


def _variant(position, warmup, rate):
    return {
        "name": f"{position}-LN, " + (f"warm-up {warmup}" if warmup else "no warm-up"),
        "slug": f"{position}_" + (f"warmup{warmup}" if warmup else "no_warmup"),
        "norm_position": position,
        "warmup_steps": warmup,
        "learning_rate": rate,
    }


def run_sweep(output_dir, cfg, task, log=print):
    """Trains the sweep and writes `sweep.md`, `sweep.json` and `sweep.png`.

    Args:
        output_dir: directory to write into.
        cfg: a resolved `CompareConfig` with `depths` set.
        task: the task object (`tfnorm.experiments.tasks.make_task`).
        log: function called with one progress line at a time.

    Returns:
        A dict with `rows` (one per depth and variant), `runs` and `paths`.
    """
    # The sweep writes scalars only: its histograms would multiply the logs.
    logdir = os.path.join(output_dir, "tensorboard_sweep")
    chosen = sweep_variants(cfg)
    log(
        f"Depth sweep: depths {list(cfg.depths)}, Post-LN warm-ups "
        f"{[v['warmup_steps'] for v in chosen if v['norm_position'] == 'post']} "
        f"of {cfg.steps} steps, Pre-LN without warm-up, seeds {list(cfg.sweep_seeds)}"
    )
    runs = []
    for depth in cfg.depths:
        depth_cfg = dataclasses.replace(cfg, num_layers=depth, histogram_every=0)
        log(f" {depth} layers")
        for position in ("post", "pre"):
            trainer = PositionTrainer(
                position,
                depth_cfg,
                task.vocab_size,
                pad_id=getattr(task, "pad_id", None),
            )
            for seed in cfg.sweep_seeds:
                for variant in [v for v in chosen if v["norm_position"] == position]:
                    runs.append(
                        train_run(
                            trainer,
                            variant,
                            seed,
                            task,
                            os.path.join(logdir, f"depth{depth}"),
                            log,
                        )
                    )
    rows = summarise_sweep(
        runs, cfg.depths, chosen, task.target_accuracy or task.target_loss
    )
    paths = {
        "sweep_markdown": os.path.join(output_dir, "sweep.md"),
        "sweep_json": os.path.join(output_dir, "sweep.json"),
        "sweep_plot": os.path.join(output_dir, "sweep.png"),
        "sweep_tensorboard": logdir,
    }
    with open(paths["sweep_markdown"], "w") as f:
        f.write(sweep_table(rows, cfg.depths, chosen, task))
    with open(paths["sweep_json"], "w") as f:
        json.dump({"rows": rows, "runs": runs}, f, indent=1)
    plot_sweep(rows, cfg.depths, paths["sweep_plot"], task)
    return {"rows": rows, "runs": runs, "paths": paths}


def summarise_sweep(runs, depths, chosen, target):
    """One row per depth and variant, aggregated over the sweep's seeds."""
    rows = []
    for depth in depths:
        for variant in chosen:
            mine = [
                r
                for r in runs
                if r["num_layers"] == depth and r["variant"] == variant["name"]
            ]
            row = {
                "num_layers": depth,
                "variant": variant["name"],
                "norm_position": variant["norm_position"],
                "warmup_steps": variant["warmup_steps"],
                **over_seeds(mine),
            }
            if not target:
                row["seeds_reaching_target"] = None
            if "final_bits_per_byte" in mine[0]:
                bits = [r["final_bits_per_byte"] for r in mine]
                row["final_bits_per_byte_mean"] = float(np.mean(bits))
                row["final_bits_per_byte_min"] = float(np.min(bits))
                row["final_bits_per_byte_max"] = float(np.max(bits))
            row["max_gradient_norm_early"] = float(
                max(r["max_gradient_norm_early"] for r in mine)
            )
            rows.append(row)
    return rows


def sweep_table(rows, depths, chosen, task):
    """A depth × variant table: the final measure (and seeds at target, median steps).

    The measure is the held-out accuracy, or for a language model the
    held-out bits per byte; the target is the task's accuracy or loss
    threshold.
    """
    names = [v["name"] for v in chosen]
    table_rows = []
    for depth in depths:
        cells = [str(depth)]
        for name in names:
            row = next(
                r for r in rows if r["num_layers"] == depth and r["variant"] == name
            )
            cells.append(_sweep_cell(row, task))
        table_rows.append(cells)
    measure = (
        "held-out bits per byte"
        if task.target_loss is not None
        else "final held-out accuracy"
    )
    target = _target_text(task)
    note = (
        f"\nCells: {measure}, mean over seeds"
        + (
            f" (seeds reaching {target}, median step they reached it)."
            if target
            else "."
        )
        + "\n"
    )
    return format_markdown_table(["layers"] + names, table_rows) + note


def _target_text(task):
    if task.target_loss is not None:
        return f"{task.sizes['threshold_bits_per_byte']:.2f} bits per byte"
    if task.target_accuracy is not None:
        return f"{task.target_accuracy:.0%}"
    return None


def _sweep_cell(row, task):
    if task.target_loss is not None:
        cell = f"{row['final_bits_per_byte_mean']:.3f}"
    else:
        cell = f"{row['final_accuracy_mean']:.3f}"
    target = _target_text(task)
    if target is not None:
        median = row["median_steps_to_target"]
        cell += (
            f" ({row['seeds_reaching_target']}/{row['seeds']} at "
            + target.split(" ")[0]
            + ("" if median is None else f", step {median:.0f}")
            + ")"
        )
    return cell


def plot_sweep(rows, depths, path, task):
    """Final accuracy against Post-LN's warm-up length, one line per depth (bits per byte for a language model)."""
    from matplotlib.figure import Figure

    bits = task.target_loss is not None
    key = "final_bits_per_byte" if bits else "final_accuracy"
    figure = Figure(figsize=(7.5, 4.6))
    ax = figure.subplots()
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    for index, depth in enumerate(depths):
        colour = colours[index % len(colours)]
        post = sorted(
            (
                r
                for r in rows
                if r["num_layers"] == depth and r["norm_position"] == "post"
            ),
            key=lambda r: r["warmup_steps"],
        )
        warmups = [r["warmup_steps"] for r in post]
        ax.plot(
            warmups,
            [r[f"{key}_mean"] for r in post],
            "o-",
            color=colour,
            label=f"Post-LN, {depth} layers",
        )
        ax.fill_between(
            warmups,
            [r[f"{key}_min"] for r in post],
            [r[f"{key}_max"] for r in post],
            color=colour,
            alpha=0.15,
        )
        pre = next(
            r for r in rows if r["num_layers"] == depth and r["norm_position"] == "pre"
        )
        # Side by side left of 0, so equal outcomes at several depths all show.
        offset = -0.03 * (len(depths) - index) * max(max(warmups), 1)
        ax.plot(
            [offset],
            [pre[f"{key}_mean"]],
            marker="*",
            markersize=14,
            color=colour,
            ls="none",
            label=f"Pre-LN, {depth} layers, no warm-up",
        )
    _sweep_axes(ax, task, bits)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def _sweep_axes(ax, task, bits):
    """The baselines and labels of the sweep's figure."""
    if bits:
        sizes = task.sizes
        ax.axhline(
            sizes["unigram_bits_per_byte"],
            color="black",
            ls="--",
            lw=0.8,
            label="unigram",
        )
        ax.axhline(sizes["bigram_bits_per_byte"], color="grey", ls=":", lw=1)
        ax.set(
            title="held-out bits per byte vs Post-LN warm-up length",
            xlabel="warm-up steps (then the peak rate held)",
            ylabel="bits per byte",
            ylim=(0, sizes["unigram_bits_per_byte"] + 1.0),
        )
        return
    ax.axhline(task.chance, color="black", ls="--", lw=0.8, label="chance")
    if task.target_accuracy is not None:
        ax.axhline(task.target_accuracy, color="grey", ls=":", lw=1)
    ax.set(
        title="final held-out accuracy vs Post-LN warm-up length",
        xlabel="warm-up steps (then the peak rate held)",
        ylabel="accuracy",
        ylim=(0, 1.02),
    )

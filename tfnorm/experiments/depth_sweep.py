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

from tfnorm.experiments.warmup_report import over_seeds
from tfnorm.experiments.warmup_runs import PositionTrainer, train_run


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
        task: the task object (`tfnorm.experiments.warmup_runs.make_task`).
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
    rows = summarise_sweep(runs, cfg.depths, chosen, task.target_accuracy)
    paths = {
        "sweep_markdown": os.path.join(output_dir, "sweep.md"),
        "sweep_json": os.path.join(output_dir, "sweep.json"),
        "sweep_plot": os.path.join(output_dir, "sweep.png"),
        "sweep_tensorboard": logdir,
    }
    with open(paths["sweep_markdown"], "w") as f:
        f.write(sweep_table(rows, cfg.depths, chosen, task.target_accuracy))
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
            row["max_gradient_norm_early"] = float(
                max(r["max_gradient_norm_early"] for r in mine)
            )
            rows.append(row)
    return rows


def sweep_table(rows, depths, chosen, target):
    """A depth × variant table: final accuracy (and seeds at target, median steps)."""
    names = [v["name"] for v in chosen]
    lines = [
        "| layers | " + " | ".join(names) + " |",
        "|" + "---|" * (len(names) + 1),
    ]
    for depth in depths:
        cells = [str(depth)]
        for name in names:
            row = next(
                r for r in rows if r["num_layers"] == depth and r["variant"] == name
            )
            cell = f"{row['final_accuracy_mean']:.3f}"
            if target is not None:
                median = row["median_steps_to_target"]
                cell += (
                    f" ({row['seeds_reaching_target']}/{row['seeds']} at "
                    f"{target:.0%}"
                    + ("" if median is None else f", step {median:.0f}")
                    + ")"
                )
            cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
    note = (
        "\nCells: final held-out accuracy, mean over seeds"
        + (
            f" (seeds reaching {target:.0%}, median step they reached it)."
            if target is not None
            else "."
        )
        + "\n"
    )
    return "\n".join(lines) + "\n" + note


def plot_sweep(rows, depths, path, task):
    """Final accuracy against Post-LN's warm-up length, one line per depth."""
    from matplotlib.figure import Figure

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
            [r["final_accuracy_mean"] for r in post],
            "o-",
            color=colour,
            label=f"Post-LN, {depth} layers",
        )
        ax.fill_between(
            warmups,
            [r["final_accuracy_min"] for r in post],
            [r["final_accuracy_max"] for r in post],
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
            [pre["final_accuracy_mean"]],
            marker="*",
            markersize=14,
            color=colour,
            ls="none",
            label=f"Pre-LN, {depth} layers, no warm-up",
        )
    ax.axhline(task.chance, color="black", ls="--", lw=0.8, label="chance")
    if task.target_accuracy is not None:
        ax.axhline(task.target_accuracy, color="grey", ls=":", lw=1)
    ax.set(
        title="final held-out accuracy vs Post-LN warm-up length",
        xlabel="warm-up steps (then the peak rate held)",
        ylabel="accuracy",
        ylim=(0, 1.02),
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)

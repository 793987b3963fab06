"""The Post-LN vs Pre-LN experiment behind `tfnorm compare`.

Xiong et al. (2020) show that at initialisation a Post-LN Transformer's
gradients near the output are large and do not shrink with depth, which makes
a learning-rate warm-up necessary, while Pre-LN's shrink like 1/sqrt(L) and it
trains without warm-up. `run_comparison` measures that claim on a small
synthetic task: each of Post-LN and Pre-LN is trained with and without a
warm-up for a few seeds, and the run reports how many seeds learn the task,
how fast, the largest gradient norm seen, and the per-layer gradient norms at
initialisation.

The task ("reverse": the target is the input reversed) and the training of
one variant for one seed are in `warmup_runs`; the tables and the figure in
`warmup_report`. The default size was calibrated on
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

import numpy as np

from tfnorm._checks import is_int
from tfnorm.choices import NORM_POSITIONS
from tfnorm.experiments.warmup_report import (
    EARLY_STEPS,
    TARGET_ACCURACY,
    markdown_table,
    plot,
    summarise,
)
from tfnorm.experiments.warmup_runs import (
    PositionTrainer,
    build_model,
    reverse_task,
    train_run,
)
from tfnorm.experiments.warmup_settings import DEFAULTS

__all__ = [
    "DEFAULTS",
    "EARLY_STEPS",
    "POSITIONS",
    "TARGET_ACCURACY",
    "build_model",
    "reverse_task",
    "run_comparison",
    "variants",
]

POSITIONS = ("post", "pre")

#: The options that count something, so must be at least 1.
_COUNTS = (
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
)


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

    >>> from tfnorm.experiments.warmup import run_comparison
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
    cfg = _options(overrides)
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
    runs = _train_all(cfg, names, eval_data, logdir, log)
    rows = summarise(runs, [n for n, _, _ in names])
    return _write_results(output_dir, logdir, cfg, rows, runs)


def _options(overrides):
    """`DEFAULTS` updated with `overrides`, each checked."""
    unknown = sorted(set(overrides) - set(DEFAULTS))
    if unknown:
        raise ValueError(
            f"Unknown option(s) {unknown}. Choose from {sorted(DEFAULTS)}."
        )
    cfg = dict(DEFAULTS)
    cfg.update(overrides)
    cfg["seeds"] = [int(s) for s in cfg["seeds"]]
    for key in _COUNTS:
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
    return cfg


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


def _train_all(cfg, names, eval_data, logdir, log):
    """Every variant for every seed, in the order of `names` then seed.

    The runs of one norm position share one `PositionTrainer`, so each
    position's step is compiled once.
    """
    runs = []
    for position in dict.fromkeys(p for _, p, _ in names):
        trainer = PositionTrainer(position, cfg)
        for seed in cfg["seeds"]:
            for name, warmup in [(n, w) for n, p, w in names if p == position]:
                runs.append(
                    train_run(trainer, name, warmup, seed, eval_data, logdir, log)
                )
    # Report in the table's order whatever order the runs ran in.
    order = {name: i for i, (name, _, _) in enumerate(names)}
    runs.sort(key=lambda run: (order[run["variant"]], run["seed"]))
    return runs


def _write_results(output_dir, logdir, cfg, rows, runs):
    """Writes the table (Markdown, CSV), the JSON record and the figure."""
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

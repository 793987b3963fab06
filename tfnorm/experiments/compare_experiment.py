"""The Post-LN vs Pre-LN experiment behind `tfnorm compare`.

Xiong et al. (2020) show that at initialisation a Post-LN Transformer's
gradients near the output are large and do not shrink with depth, which makes
a learning-rate warm-up necessary, while Pre-LN's shrink like 1/sqrt(L) and it
trains without warm-up. `run_comparison` measures that claim: Post-LN and
Pre-LN are each trained without warm-up and with a linear warm-up that ends
early (at most 30% of the run; then the peak rate is held), for a few seeds,
plus a control that separates "warm-up helps" from "a lower learning rate
helps": Post-LN without warm-up at a constant rate equal to the warm-up run's
mean rate. The run reports how many seeds learn the task, how fast, the
gradient norm at step 0 and the largest one in the early steps after it, and
the per-layer gradient norms at initialisation; `depths=(6, 12, 18)` adds a
depth sweep (`tfnorm.experiments.depth_sweep`).

With `task="lm"` the same design trains causal decoders
(`tfnorm.build_decoder`) on the bytes of the Python language reference
(`tasks.lm`), and adds LayerNorm vs RMSNorm vs DyT at Pre-LN (`norms`); its
table reads held-out bits per byte, steps to a loss threshold (a bigram
model's bits per byte) and the step time (`compare_lm_report`).

The tasks and the training of one variant for one seed are in
`compare_runs` (and `tasks.text` for masked-language modelling on real text);
the tables and the figure in `compare_report`. The default size was
calibrated on 2 CPU cores: with 6 layers and a peak learning rate of 1e-2
held after a 60-step warm-up, Post-LN without warm-up (and at the warm-up's
mean rate) stays near chance on the reverse task, Pre-LN reaches 95% token
accuracy within ~60 steps, and Post-LN with warm-up within ~120-200.
`docs/experiments.md` gives the measured tables.

Reference: [Xiong et al., 2020, "On Layer Normalization in the Transformer
Architecture"](https://arxiv.org/abs/2002.04745).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os

import numpy as np

from tfnorm import _keras
from tfnorm._checks import is_int, is_real
from tfnorm.choices import NORM_POSITIONS, NORMS
from tfnorm.experiments import compare_lm_report as lm_report
from tfnorm.experiments.batch_gradients import (
    gradient_variance_summary,
    gradient_variance_table,
)
from tfnorm.experiments.claim_measures import (
    control_summary,
    controls_table,
    write_step_table,
)
from tfnorm.experiments.compare_report import (
    TARGET_ACCURACY,
    markdown_table,
    per_seed_table,
    plot,
    summarise,
)
from tfnorm.experiments.compare_runs import (
    PositionTrainer,
    build_model,
    learning_rates,
    train_run,
)
from tfnorm.experiments.compare_settings import DEFAULTS, CompareConfig
from tfnorm.experiments.figures import EARLY_STEPS
from tfnorm.experiments.tasks import make_task, reverse_task

__all__ = [
    "DEFAULTS",
    "EARLY_STEPS",
    "POSITIONS",
    "TARGET_ACCURACY",
    "CompareConfig",
    "build_model",
    "reverse_task",
    "run_comparison",
    "variants",
]

POSITIONS = ("post", "pre")


def variants(cfg, settings=None):
    """The runs per seed, as dicts with `name`, `slug`, `norm_position`, `norm`, `warmup_steps`, `learning_rate`.

    `settings` is a list of `(norm_position, warmup_steps)` or
    `(norm_position, warmup_steps, learning_rate)` tuples (the rate is the
    peak, `cfg.learning_rate` when not given). By default: Post-LN without
    warm-up, with `cfg.warmup_steps` of it, and without warm-up at the
    warm-up run's mean rate (the control); Pre-LN without and with warm-up.
    All use `cfg.norm`; then each of `cfg.norms` (the decoder experiment's
    norm comparison) adds a Pre-LN run with `cfg.warmup_steps` of warm-up
    at the peak rate, unless one of the runs above is that run.
    """
    peak = cfg.learning_rate
    if settings is None:
        mean = float(np.mean(learning_rates(peak, cfg.warmup_steps, cfg.steps)))
        settings = [
            ("post", 0),
            ("post", cfg.warmup_steps),
            ("post", 0, mean),
            ("pre", 0),
            ("pre", cfg.warmup_steps),
        ]
    result = [_variant(cfg, setting) for setting in settings]
    for norm in cfg.norms or ():
        extra = _variant(cfg, ("pre", cfg.warmup_steps, peak), norm)
        if not any(_same_run(extra, other) for other in result):
            result.append(extra)
    return result


def _variant(cfg, setting, norm=None):
    position, warmup = setting[0], int(setting[1])
    rate = float(setting[2]) if len(setting) == 3 else cfg.learning_rate
    name = f"{position}-LN, " + (f"warm-up {warmup}" if warmup else "no warm-up")
    slug = f"{position}_" + (f"warmup{warmup}" if warmup else "no_warmup")
    if rate != cfg.learning_rate:
        name += f", rate {rate:.3g}"
        slug += f"_rate{rate:.3g}"
    if norm is not None and norm != cfg.norm:
        name += f", {NORMS[norm].class_name}"
        slug += f"_{norm}"
    return {
        "name": name,
        "slug": slug.replace("-", ""),
        "norm_position": position,
        "norm": norm or cfg.norm,
        "warmup_steps": warmup,
        "learning_rate": rate,
    }


def _same_run(one, other):
    keys = ("norm_position", "norm", "warmup_steps", "learning_rate")
    return all(one[key] == other[key] for key in keys)


def run_comparison(
    output_dir, log=print, variant_settings=None, config=None, **overrides
):
    """Runs the Post-LN vs Pre-LN experiment and writes its results.

    Each variant (see `variants`) is trained for each seed, with its
    learning rate warmed up linearly (or not) and then held at its peak.
    With `config.deterministic` (the default) TensorFlow's deterministic
    ops are on while it runs (`enable_op_determinism`; the process's own
    setting is restored after), so the same call on the same runtime gives
    the same numbers.

    Writes into `output_dir`:

    * `results.md` and `results.csv`: the table, one row per variant (peak
      and mean learning rate, warm-up and run length, seeds reaching the
      task's target accuracy, median steps to get there, final accuracy,
      the gradient norm at step 0 and the largest one in steps 1 to
      `EARLY_STEPS`, the ratio of the last to the first layer's FFN
      gradient norm at initialisation, and the variance of the per-block
      gradient norms across layers and over training, see
      `tfnorm.experiments.layer_gradients`); `results.md` also has every
      seed's row;
    * `results.json`: the configuration, the task, the table and every
      run's curves;
    * `steps.csv`: every run's steps: loss, gradient norm, loss scale,
      applied or skipped, every weight finite;
    * `comparison.png`: loss curves, accuracy curves and the per-layer
      gradient norms at initialisation;
    * `tensorboard/<variant>_seed<k>/`: the scalars per step, and in its
      `norms/` the histograms of every norm layer's outputs;
    * with `depths`: `sweep.md`, `sweep.json` and `sweep.png`.

    Example:

    >>> from tfnorm.experiments.compare_experiment import run_comparison
    >>> result = run_comparison(
    ...     "runs/compare", num_layers=2, steps=20, warmup_steps=5, seeds=(0,))

    Args:
        output_dir: directory to write into (created if needed).
        log: function called with one progress line at a time. Defaults to
            `print`.
        variant_settings: list of `(norm_position, warmup_steps)` or
            `(norm_position, warmup_steps, learning_rate)` tuples to train
            instead of the default five, e.g. `[("sandwich", 0),
            ("deepnorm", 0)]`.
        config: a `CompareConfig`; `**overrides` are applied over it.
        **overrides: any `CompareConfig` field: `task` ("reverse",
            "mlm" or "lm"), `norms` (lm: norms compared at Pre-LN),
            `num_layers`, `d_model`, `num_heads`, `dff`,
            `vocab_size`, `seq_len`, `batch_size`, `steps`,
            `learning_rate` (peak), `warmup_steps`, `seeds`, `norm`,
            `epsilon`, `variants` (as `variant_settings`), `gamma_init`,
            `input_offset`, `statistics`, `variable_length`,
            `embedding_std`, `position_offset`, `deep_epsilon`,
            `batchnorm_padding`, `batchnorm_momentum`,
            `gradient_variance_batches`, `gradient_variance_loss`,
            `eval_size`, `eval_every`, `histogram_every`, `depths`,
            `sweep_warmups`, `sweep_seeds`, `jit_compile`,
            `mixed_precision`, `deterministic`.

    Returns:
        A dict with `config`, `task`, `table` (the summary rows), `runs`,
        `paths` and, with `depths`, `sweep`.

    Raises:
        ValueError: (a `ConfigError`) naming the first bad option.
    """
    cfg = _resolve(config, overrides)
    if variant_settings is None and cfg.variants:
        variant_settings = [list(entry) for entry in cfg.variants]
    _check_variant_settings(variant_settings, cfg.steps)
    os.makedirs(output_dir, exist_ok=True)
    with _determinism(cfg):
        return _run(output_dir, log, variant_settings, cfg)


def _run(output_dir, log, variant_settings, cfg):
    logdir = os.path.join(output_dir, "tensorboard")
    task = make_task(cfg)
    chosen = variants(cfg, variant_settings)
    log(
        f"Post-LN vs Pre-LN, {task.description}: {cfg.num_layers} layers, "
        f"d_model {cfg.d_model}, {cfg.steps} steps, peak lr "
        f"{cfg.learning_rate}, warm-up {cfg.warmup_steps}, seeds {list(cfg.seeds)}"
        + (f", norms at Pre-LN {list(cfg.norms)}" if cfg.norms else "")
    )
    runs = _train_all(cfg, chosen, task, logdir, log)
    rows = summarise(runs, [v["name"] for v in chosen])
    for row in rows:
        mine = [r for r in runs if r["variant"] == row["variant"]]
        row.update(control_summary(mine))
        row.update(gradient_variance_summary(mine))
    if task.name == "lm":
        rows = lm_report.add_lm_columns(rows, runs)
    result = _write_results(output_dir, logdir, cfg, task, rows, runs)
    if cfg.depths:
        from tfnorm.experiments.depth_sweep import run_sweep

        result["sweep"] = run_sweep(output_dir, cfg, task, log)
        result["paths"].update(result["sweep"]["paths"])
    return result


def _resolve(config, overrides):
    values = (config or CompareConfig()).to_dict()
    return CompareConfig.from_dict({**values, **overrides}).resolve()


def _determinism(cfg):
    # Every random draw is seeded (weights per run, data from NumPy
    # generators); deterministic kernels remove the rest of the run-to-run
    # spread (the order of parallel reductions), while the experiment runs.
    if cfg.deterministic:
        return _keras.deterministic_ops()
    return contextlib.nullcontext()


def _check_variant_settings(settings, steps):
    if settings is None:
        return
    valid = bool(settings) and all(
        isinstance(entry, (list, tuple))
        and len(entry) in (2, 3)
        and entry[0] in NORM_POSITIONS
        and is_int(entry[1])
        and 0 <= entry[1] < steps
        and (len(entry) == 2 or (is_real(entry[2]) and entry[2] > 0))
        for entry in settings
    )
    if not valid:
        raise ValueError(
            "`variant_settings` must be a non-empty list of (norm_position, "
            "warmup_steps) or (norm_position, warmup_steps, learning_rate) "
            f"tuples, norm_position one of {NORM_POSITIONS}, warmup_steps an "
            f"integer from 0 to steps - 1 ({steps - 1}) and learning_rate > 0. "
            f"Received: variant_settings={settings!r}"
        )


def _train_all(cfg, chosen, task, logdir, log):
    """Every variant for every seed, in the order of `chosen` then seed.

    The runs of one norm position and norm share one `PositionTrainer`, so
    each one's step is compiled once.
    """
    runs = []
    for position, norm in dict.fromkeys(
        (v["norm_position"], v["norm"]) for v in chosen
    ):
        trainer = PositionTrainer(
            position,
            cfg,
            task.vocab_size,
            norm=norm,
            pad_id=getattr(task, "pad_id", None),
        )
        mine = [
            v for v in chosen if (v["norm_position"], v["norm"]) == (position, norm)
        ]
        for seed in cfg.seeds:
            for variant in mine:
                runs.append(train_run(trainer, variant, seed, task, logdir, log))
    # Report in the table's order whatever order the runs ran in.
    order = {v["name"]: i for i, v in enumerate(chosen)}
    runs.sort(key=lambda run: (order[run["variant"]], run["seed"]))
    return runs


def task_record(task):
    """What `results.json` says about the task."""
    return {
        "name": task.name,
        "description": task.description,
        "vocab_size": task.vocab_size,
        "chance_accuracy": task.chance,
        "target_accuracy": task.target_accuracy,
        **task.sizes,
    }


def _write_results(output_dir, logdir, cfg, task, rows, runs):
    """Writes the table (Markdown, CSV), the JSON record and the figure."""
    paths = {
        "markdown": os.path.join(output_dir, "results.md"),
        "csv": os.path.join(output_dir, "results.csv"),
        "json": os.path.join(output_dir, "results.json"),
        "steps": os.path.join(output_dir, "steps.csv"),
        "plot": os.path.join(output_dir, "comparison.png"),
        "tensorboard": logdir,
    }
    with open(paths["markdown"], "w") as f:
        if task.name == "lm":
            f.write(lm_report.markdown_table(rows, task))
            f.write("\nEvery seed:\n\n")
            f.write(lm_report.per_seed_table(runs, task))
        else:
            f.write(markdown_table(rows, task.target_accuracy))
            f.write("\nEvery seed:\n\n")
            f.write(per_seed_table(runs, task.target_accuracy))
        f.write("\nNaN/Inf and the norms' train/inference gap:\n\n")
        f.write(controls_table(rows))
        if gradient_variance_table(rows):
            f.write("\nBatch-to-batch gradient variance per block, fixed weights:\n\n")
            f.write(gradient_variance_table(rows))
    with open(paths["csv"], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    write_step_table(paths["steps"], runs)
    result = {
        "config": _jsonable(cfg.to_dict()),
        "task": task_record(task),
        "table": rows,
        "runs": runs,
        "paths": paths,
    }
    with open(paths["json"], "w") as f:
        json.dump(result, f, indent=1)
    if task.name == "lm":
        lm_report.plot(runs, rows, paths["plot"], task)
    else:
        plot(runs, rows, paths["plot"], chance=task.chance, target=task.target_accuracy)
    return result


def _jsonable(values):
    return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}

"""What `tfnorm compare` measures for the claims its controls test.

* `NonFiniteWatch`: the steps whose training loss was NaN or Inf, the steps
  the optimizer skipped (dynamic loss scaling in float16 skips a step whose
  gradients are not finite: read from the optimizer's own state, the step's
  `applied`, not inferred from the recorded gradient norm), the steps whose
  recorded gradient norm was not finite (the same steps, unless a
  non-finite gradient was applied), and, at the first non-finite loss and
  again at the first skipped step, where `tfnorm.callbacks.NormHealthMonitor` says it starts: it runs
  the model on that step's batch and names the first norm layer, in call
  order, with non-finite inputs or outputs or a row statistic below its
  `epsilon`. (Gradients can overflow while the loss stays finite; a probe
  that finds nothing there says the forward pass was sound.)
* `StepTrace`: per step, the loss scale the step's loss was multiplied by
  (1 without loss scaling), whether the optimizer applied the step, and
  whether every weight of the model (`weights_finite`, read after the
  step) is finite; `write_step_table` writes them as `steps.csv`.
* `BatchStatisticsEvaluation`: after the last step, the held-out loss and
  accuracy with the norms in training mode (batch statistics, in batches
  of `batch_size`) beside the usual inference-mode ones (for a batch norm,
  its moving averages): the train/inference gap. Dropout is 0 in these
  runs, so for row-wise norms the two agree.
* `controls_table`: the table of both, one row per variant.
"""

from __future__ import annotations

import math

import numpy as np

from tfnorm._keras import tf
from tfnorm.experiments.tables import format_markdown_table
from tfnorm.training.loop.driver import Action

#: How many problems of the first non-finite step a run's record keeps.
KEPT_PROBLEMS = 5


class NonFiniteWatch(Action):
    """Non-finite losses, skipped steps, and the first broken norm layer.

    Reads the step's logs: `loss`, `gradient_norm` (of the gradients the
    optimizer saw, unscaled), `applied` (the optimizer's decision) and
    `batch`.
    """

    def __init__(self, model):
        self.model = model
        self.loss_steps, self.skipped_steps, self.gradient_steps = [], [], []
        self.problems, self.overflow_problems = [], []

    def on_step_end(self, step, logs):
        if not math.isfinite(logs["gradient_norm"]):
            self.gradient_steps.append(step)
        if not logs["applied"]:
            self.skipped_steps.append(step)
            if len(self.skipped_steps) == 1:
                self.overflow_problems = _health_problems(
                    self.model, logs["batch"][0], step
                )
        if math.isfinite(logs["loss"]):
            return
        self.loss_steps.append(step)
        if len(self.loss_steps) == 1:
            self.problems = _health_problems(self.model, logs["batch"][0], step)

    def close(self):
        """Nothing to close (the run's actions are closed alike)."""

    def record(self):
        first = _first_layer(self.problems)
        at_overflow = _first_layer(self.overflow_problems)
        return {
            "nonfinite_loss_steps": self.loss_steps,
            "skipped_steps": self.skipped_steps,
            "nonfinite_gradient_steps": self.gradient_steps,
            "first_broken_norm": first.layer if first else None,
            "first_broken_norm_statistic": first.statistic if first else None,
            "health_problems": _kept(self.problems),
            "first_broken_norm_at_overflow": at_overflow.layer if at_overflow else None,
            "overflow_health_problems": _kept(self.overflow_problems),
        }


def _first_layer(problems):
    return next((p for p in problems if p.layer is not None), None)


def _kept(problems):
    return [
        {
            "step": p.step,
            "layer": p.layer,
            "statistic": p.statistic,
            "value": _plain(p.value),
        }
        for p in problems[:KEPT_PROBLEMS]
    ]


def _health_problems(model, tokens, step):
    """`NormHealthMonitor`'s findings on `tokens` (no warning issued)."""
    from tfnorm.callbacks import NormHealthMonitor

    monitor = NormHealthMonitor(tokens)
    monitor.set_model(model)
    return monitor.probe_problems(step)


def _plain(value):
    value = float(value)
    return value if math.isfinite(value) else str(value)


def weights_finite(model):
    """Whether every weight of `model` (trainable or not) is finite, as a
    boolean scalar tensor (inside a step: read after its update)."""
    # Integer state (a seed generator's) is always finite.
    floats = [w for w in model.weights if tf.as_dtype(w.dtype).is_floating]
    return tf.reduce_all(
        tf.stack([tf.reduce_all(tf.math.is_finite(w)) for w in floats])
    )


class StepTrace(Action):
    """Every step's loss scale, applied or skipped, and weights finite.

    Reads the step's logs: `loss_scale`, `applied` and `weights_finite`.
    """

    def __init__(self):
        self.loss_scales, self.applied, self.finite = [], [], []

    def on_step_end(self, step, logs):
        self.loss_scales.append(logs["loss_scale"])
        self.applied.append(logs["applied"])
        self.finite.append(logs["weights_finite"])

    def close(self):
        """Nothing to close (the run's actions are closed alike)."""

    def record(self):
        return {
            "loss_scales": self.loss_scales,
            "applied": self.applied,
            "weights_finite": self.finite,
            "nonfinite_weight_steps": [
                step for step, finite in enumerate(self.finite, 1) if not finite
            ],
        }


#: The columns of `steps.csv`, one row per run and step.
STEP_COLUMNS = (
    "variant",
    "seed",
    "step",
    "loss",
    "gradient_norm",
    "loss_scale",
    "applied",
    "weights_finite",
)


def write_step_table(path, runs):
    """Writes every run's per-step record to `path` as CSV (`STEP_COLUMNS`)."""
    import csv

    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(STEP_COLUMNS)
        for run in runs:
            for index, loss in enumerate(run["losses"]):
                writer.writerow(
                    [
                        run["variant"],
                        run["seed"],
                        index + 1,
                        loss,
                        run["gradient_norms"][index],
                        run["loss_scales"][index],
                        int(run["applied"][index]),
                        int(run["weights_finite"][index]),
                    ]
                )


class BatchStatisticsEvaluation(Action):
    """The held-out loss and accuracy in training mode, after the last step."""

    def __init__(self, model, eval_data, batch_size, total_steps):
        self.model = model
        self.eval_data = eval_data
        self.batch_size = batch_size
        self.total_steps = total_steps
        self.loss = self.accuracy = None
        self._evaluate = tf.function(self._sums)

    def _sums(self, tokens, targets, weights):
        # Training mode: a batch norm normalises by this batch's statistics
        # (and updates its moving averages, which no later evaluation reads).
        logits = tf.cast(self.model(tokens, training=True), tf.float32)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits)
        hits = tf.cast(
            tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), targets),
            tf.float32,
        )
        return tf.reduce_sum(losses * weights), tf.reduce_sum(hits * weights)

    def on_step_end(self, step, logs):
        if step != self.total_steps:
            return
        tokens, targets, weights = self.eval_data
        loss = hits = 0.0
        for start in range(0, len(tokens), self.batch_size):
            part = slice(start, start + self.batch_size)
            batch_loss, batch_hits = self._evaluate(
                tf.constant(tokens[part]),
                tf.constant(targets[part]),
                tf.constant(weights[part]),
            )
            loss += float(batch_loss)
            hits += float(batch_hits)
        total = max(float(np.sum(weights)), 1.0)
        self.loss, self.accuracy = loss / total, hits / total

    def close(self):
        """Nothing to close (the run's actions are closed alike)."""

    def record(self):
        return {
            "eval_loss_batch_statistics": self.loss,
            "eval_accuracy_batch_statistics": self.accuracy,
        }


def measurement_actions(model, eval_data, batch_size, total_steps):
    """The actions `train_run` adds for the controls' claims."""
    return [
        NonFiniteWatch(model),
        StepTrace(),
        BatchStatisticsEvaluation(model, eval_data, batch_size, total_steps),
    ]


def control_summary(runs):
    """What `controls_table` says of one variant's `runs` (one per seed)."""
    first_steps = [
        r["nonfinite_loss_steps"][0] for r in runs if r["nonfinite_loss_steps"]
    ]
    layers = sorted({r["first_broken_norm"] for r in runs if r["first_broken_norm"]})
    at_overflow = sorted(
        {r.get("first_broken_norm_at_overflow") for r in runs} - {None}
    )
    gaps = [
        r["final_eval_loss"] - r["eval_loss_batch_statistics"]
        for r in runs
        if r.get("eval_loss_batch_statistics") is not None
    ]
    return {
        "seeds_with_nonfinite_loss": len(first_steps),
        "first_nonfinite_step": min(first_steps) if first_steps else None,
        "nonfinite_loss_steps_total": sum(len(r["nonfinite_loss_steps"]) for r in runs),
        "skipped_steps_total": sum(len(r["skipped_steps"]) for r in runs),
        # Steps whose recorded gradients were not finite yet applied: 0
        # unless a non-finite gradient reached the weights.
        "applied_nonfinite_gradient_steps_total": sum(
            len(set(r["nonfinite_gradient_steps"]) - set(r["skipped_steps"]))
            for r in runs
        ),
        "nonfinite_weight_steps_total": sum(
            len(r.get("nonfinite_weight_steps", ())) for r in runs
        ),
        "first_broken_norms": layers,
        "first_broken_norms_at_overflow": at_overflow,
        "eval_loss_batch_statistics_mean": _mean(
            [r.get("eval_loss_batch_statistics") for r in runs]
        ),
        "eval_accuracy_batch_statistics_mean": _mean(
            [r.get("eval_accuracy_batch_statistics") for r in runs]
        ),
        "train_inference_gap_mean": _mean(gaps),
    }


def _mean(values):
    values = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(values)) if values else None


def controls_table(rows):
    """The Markdown table of the controls' columns of `rows` (summary rows
    with `control_summary`'s fields)."""
    columns = [
        "variant",
        "seeds with NaN/Inf loss",
        "first NaN/Inf step",
        "NaN/Inf loss steps (all seeds)",
        "steps skipped by loss scaling (all seeds)",
        "non-finite gradients applied (all seeds)",
        "steps with a non-finite weight (all seeds)",
        "first broken norm (health monitor)",
        "at the first skipped step",
        "held-out loss, inference mode",
        "held-out loss, batch statistics",
        "held-out accuracy, inference / batch statistics",
    ]
    table_rows = []
    for row in rows:
        cells = [
            row["variant"],
            f"{row['seeds_with_nonfinite_loss']}/{row['seeds']}",
            _text(row["first_nonfinite_step"]),
            str(row["nonfinite_loss_steps_total"]),
            str(row["skipped_steps_total"]),
            str(row["applied_nonfinite_gradient_steps_total"]),
            str(row["nonfinite_weight_steps_total"]),
            ", ".join(row["first_broken_norms"]) or "-",
            ", ".join(row["first_broken_norms_at_overflow"]) or "-",
            _text(row["final_eval_loss_mean"], "{:.3f}"),
            _text(row["eval_loss_batch_statistics_mean"], "{:.3f}"),
            f"{row['final_accuracy_mean']:.3f} / "
            + _text(row["eval_accuracy_batch_statistics_mean"], "{:.3f}"),
        ]
        table_rows.append(cells)
    return format_markdown_table(columns, table_rows)


def _text(value, form="{}"):
    return "-" if value is None else form.format(value)

"""A callback that reports NaN/Inf and collapsing variance in norm layers."""

from __future__ import annotations

import collections
import math
import warnings

import numpy as np

from tfnorm._checks import check_choice, check_number
from tfnorm.callbacks.base import PeriodicCallback
from tfnorm.callbacks.layers import find_norm_layers
from tfnorm.callbacks.probe import NormProbe, as_batches, check_probe_data

ON_PROBLEM_CHOICES = ("warn", "stop", "raise")


class NormHealthError(RuntimeError):
    """Raised by `NormHealthMonitor(on_problem="raise")`; `.problems` lists them."""

    def __init__(self, message, problems):
        super().__init__(message)
        self.problems = list(problems)


class NormHealthWarning(RuntimeWarning):
    """Issued by `NormHealthMonitor` for every problem it finds."""


NormProblem = collections.namedtuple(
    "NormProblem", ["step", "layer", "statistic", "value", "threshold"]
)
NormProblem.__doc__ = """One finding of `NormHealthMonitor`.

`layer` is the norm layer's path in the model (e.g.
`encoder/block_0/attention_norm`), or None for the loss; `statistic` names
what was measured (`outputs/nonfinite_fraction`, `inputs/nonfinite_fraction`,
`inputs/variance_over_epsilon`, `inputs/mean_square_over_epsilon`,
`inputs/norm_over_epsilon`, as each norm layer's `row_statistic_name`
says, `loss`); `threshold` is the limit it crossed.
"""


class NormHealthMonitor(PeriodicCallback):
    """Reports norm layers that produce NaN/Inf or whose input variance collapses.

    The classic half-precision failure of a Transformer shows up first in its
    normalisation layers: an input overflows to Inf and the norm turns it into
    NaN, or the input variance shrinks toward `epsilon` so that the norm
    stops normalising. This callback names the layer and the step:

    * every training step, the loss is checked: a NaN or Inf loss is always
      reported, with or without probe data;
    * with a probe batch `data`, every `every_n_steps` steps, at epoch end and
      whenever the loss goes non-finite, it runs the model on `data` (with
      `training=False`, in a separate function, so training is unchanged) and
      checks, for every norm layer in call order: non-finite inputs,
      non-finite outputs, and the smallest per-row input variance (mean
      square for RMS norms, L2 norm for ScaleNorm: what the layer's
      `row_statistic` returns) divided by the layer's `epsilon`, against
      `variance_floor`.

    Findings go to `problems` (a list of `NormProblem`) and then, by
    `on_problem`: `"warn"` issues a `NormHealthWarning`; `"stop"` warns and
    sets `model.stop_training`, ending `fit` after the current step;
    `"raise"` raises `NormHealthError`, whose message names the first layer
    affected (in call order, which is where a NaN starts).

    Example:

    ```python
    monitor = tfnorm.callbacks.NormHealthMonitor(x_train[:16], on_problem="stop")
    model.fit(x_train, y_train, callbacks=[monitor])
    for problem in monitor.problems:
        print(problem.step, problem.layer, problem.statistic, problem.value)
    ```

    The probe runs once when `fit` starts, so probe data the model cannot
    take fails then, naming `data`. In a custom training loop, call
    `set_model(model)` once and `check(step, loss)` when wanted.

    Args:
        data: the probe batch (`x`, `(x, y)` or `(x, y, sample_weight)`; only
            `x` is used) or a small `tf.data.Dataset`, or None to check the
            loss only. Defaults to `None`.
        on_problem: `"warn"`, `"stop"` or `"raise"`. Defaults to `"warn"`.
        variance_floor: float >= 0, the smallest acceptable input variance as a
            multiple of the layer's `epsilon`; below 1, `epsilon` dominates
            the denominator and the layer no longer normalises. `0` turns the
            check off. Defaults to `1.0`.
        every_n_steps: int >= 1, probe every this many training steps.
            Defaults to `100`.
    """

    def __init__(
        self, data=None, on_problem="warn", variance_floor=1.0, every_n_steps=100
    ):
        super().__init__(every_n_steps)
        check_choice("on_problem", on_problem, ON_PROBLEM_CHOICES)
        check_number("variance_floor", variance_floor, minimum=0.0)
        self.on_problem = on_problem
        self.variance_floor = float(variance_floor)
        self.batches = None if data is None else as_batches(data)
        self.problems = []
        self.probe = None
        self._loss_was_finite = True

    def _forget_model(self):
        self.probe = None

    def _prepare(self, model):
        if self.batches is None:
            return
        self.probe = NormProbe(
            model,
            find_norm_layers(model),
            record=("inputs", "outputs"),
            max_values=1,
            input_floor=True,
        )
        check_probe_data(model, lambda: self.probe.run(self.batches), self.batches)

    def probe_problems(self, step):
        """The problems found in the norm layers on the probe batch (no report)."""
        if self.batches is None:
            return []
        self._prepare_once()
        problems = []
        results = self.probe.run(self.batches)
        for path, recorded in results.items():
            for kind in ("inputs", "outputs"):
                fraction = recorded[kind]["nonfinite_fraction"]
                if fraction > 0:
                    problems.append(
                        NormProblem(
                            step, path, f"{kind}/nonfinite_fraction", fraction, 0.0
                        )
                    )
            ratio = recorded["floor"]
            if ratio < self.variance_floor:
                statistic = self.probe.statistics[path].row_statistic_name
                problems.append(
                    NormProblem(
                        step,
                        path,
                        f"inputs/{statistic}_over_epsilon",
                        ratio,
                        self.variance_floor,
                    )
                )
        return problems

    def check(self, step, loss=None):
        """Checks `loss` (if given) and the probe batch (if any), and reports.

        Returns:
            The list of `NormProblem` found at this check.
        """
        step = int(step)
        problems = []
        if loss is not None:
            value = float(np.asarray(loss))
            if not math.isfinite(value):
                problems.append(NormProblem(step, None, "loss", value, None))
        problems.extend(self.probe_problems(step))
        self._report(problems)
        return problems

    def _report(self, problems):
        if not problems:
            return
        self.problems.extend(problems)
        message = _describe(problems, self.batches is not None)
        if self.on_problem == "raise":
            raise NormHealthError(message, problems)
        warnings.warn(message, NormHealthWarning, stacklevel=3)
        if self.on_problem == "stop" and self.model is not None:
            self.model.stop_training = True

    def _periodic(self, step):
        self.check(step)

    def on_epoch_begin(self, epoch, logs=None):
        super().on_epoch_begin(epoch, logs)
        # Keras reports a running mean of the loss that restarts each epoch.
        self._loss_was_finite = True

    def on_train_batch_end(self, batch, logs=None):
        due = self._advance(batch)
        loss = (logs or {}).get("loss")
        finite = loss is None or math.isfinite(float(np.asarray(loss)))
        newly_nonfinite = not finite and self._loss_was_finite
        self._loss_was_finite = finite
        # One report when the loss turns non-finite, not one per later step
        # (the probe runs with it, to name the layer).
        if newly_nonfinite:
            self._last_step = self._step
            self.check(self._step, loss)
        elif due:
            self._run_once(self._step)


def _describe(problems, probed):
    lines = []
    for p in problems:
        if p.layer is None:
            lines.append(f"step {p.step}: the loss is {p.value}")
        else:
            lines.append(
                f"step {p.step}: norm layer '{p.layer}': {p.statistic} = "
                f"{p.value:.4g} (limit {p.threshold:g})"
            )
    first_layer = next((p.layer for p in problems if p.layer is not None), None)
    if first_layer is not None:
        head = f"Norm health problem in layer '{first_layer}'"
    elif probed:
        head = "Non-finite loss; every norm layer is finite on the probe batch"
    else:
        head = "Non-finite loss (pass probe `data` to locate the norm layer)"
    return head + ":\n  " + "\n  ".join(lines)

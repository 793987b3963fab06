"""The batch-to-batch gradient variance of each block, at fixed weights.

"Pre-LN lowers the gradient variance" usually means the noise of the
stochastic gradient: how much a block's gradient changes from one batch to
the next at the same weights. `tfnorm compare --gradient-variance-batches K`
measures it with the weights held fixed, on K fixed batches `b_1 .. b_K`
(the same for every variant of a seed), at initialisation and, with
`--gradient-variance-loss`, at the first evaluation whose held-out loss is
at or below that value (so that the two placements are compared at equal
loss, not at equal steps):

```
g_k = d loss(b_k) / d theta_l             theta_l: block l's P_l weights
variance[l]    = 1/P_l sum_p  1/(K-1) sum_k (g_k[p] - mean_k g_k[p])^2
mean_square[l] = 1/P_l sum_p  (mean_k g_k[p])^2
```

`variance` is the mean over the block's parameters of each parameter's
sample variance over the batches (ddof 1: an unbiased estimate of the
gradient's variance as a function of the batch drawn). It is the trace of
the gradient's covariance divided by `P_l`: the noise term of SGD's
analyses, and unlike the variance of the gradient's norm it sees a change
of direction (two batches whose gradients have equal norms and opposite
signs vary by the most, their norms not at all). `mean_square` is the size
of the mean gradient, the signal the noise is compared with: the two
placements' gradients differ in size, so their ratio is reported too.

Nothing moves while it is measured: the optimizer does not step, and the
non-trainable weights a batch norm updates in training mode are restored.
"""

from __future__ import annotations

import math

import numpy as np

from tfnorm import _keras
from tfnorm._keras import tf
from tfnorm.experiments.tables import format_markdown_table
from tfnorm.training.loop.driver import Action


def block_gradient_variance(per_batch, groups):
    """`variance` and `mean_square` per block, from each batch's gradients.

    Args:
        per_batch: a list (K >= 2 batches) of lists (one array per
            variable) of gradients, in the same variable order each time.
        groups: for each block, the indices of its variables.

    Returns:
        A dict of two lists of floats, one value per block: `variance` and
        `mean_square` (see the module's docstring).

    Raises:
        ValueError: fewer than two batches.
    """
    if len(per_batch) < 2:
        raise ValueError(
            "The batch-to-batch variance needs at least two batches. "
            f"Received: {len(per_batch)} batch(es)"
        )
    variance, mean_square = [], []
    for group in groups:
        # (K, P_l): every batch's gradient of the block as one vector.
        grid = np.stack(
            [
                np.concatenate([np.ravel(grads[i]) for i in group]).astype("float64")
                for grads in per_batch
            ]
        )
        variance.append(float(np.mean(np.var(grid, axis=0, ddof=1))))
        mean_square.append(float(np.mean(np.mean(grid, axis=0) ** 2)))
    return {"variance": variance, "mean_square": mean_square}


class BlockGradients:
    """Each block's gradient on one batch at the model's current weights.

    Args:
        model: the `keras.Model`.
        groups: for each block, the indices of its weights in
            `model.trainable_variables` (`layer_gradients.block_variable_groups`).
        loss_fn: `loss_fn(model, *batch)`, the scalar loss of one batch
            (the model called in training mode).
        optimizer: its loss scale (float16) is applied to the loss and
            divided out of the gradients, as in a training step. Optional.
    """

    def __init__(self, model, groups, loss_fn, optimizer=None):
        self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
        trainable = model.trainable_variables
        used = sorted({i for group in groups for i in group})
        self.variables = [trainable[i] for i in used]
        # The groups' indices into `self.variables`.
        where = {index: n for n, index in enumerate(used)}
        self.groups = [[where[i] for i in group] for group in groups]
        self._gradients = tf.function(self._batch_gradients)

    def _batch_gradients(self, *batch):
        with tf.GradientTape() as tape:
            loss = self.loss_fn(self.model, *batch)
            scaled = loss
            if self.optimizer is not None:
                scaled = _keras.scale_loss(self.optimizer, loss)
        grads = tape.gradient(scaled, self.variables)
        scale = tf.constant(1.0)
        if self.optimizer is not None:
            grads = _keras.unscale_gradients(self.optimizer, grads)
            scale = _keras.gradient_scale(self.optimizer)
        return [
            tf.zeros_like(v, tf.float32)
            if g is None
            else tf.cast(g, tf.float32) / tf.cast(scale, tf.float32)
            for g, v in zip(grads, self.variables)
        ]

    def measure(self, batches):
        """`block_gradient_variance` over `batches`, the weights left as they were."""
        kept = [v.numpy() for v in self.model.non_trainable_variables]
        per_batch = [
            [g.numpy() for g in self._gradients(*(tf.constant(p) for p in batch))]
            for batch in batches
        ]
        for variable, value in zip(self.model.non_trainable_variables, kept):
            variable.assign(value)
        return block_gradient_variance(per_batch, self.groups)


class GradientVariance(Action):
    """Measures `BlockGradients` at initialisation and at a held-out loss.

    `measure_now()` takes the first measure (call it before the first
    step); after each step the run's `Evaluate` action's latest evaluation
    is read, and the first one at or below `loss` is measured too.

    Args:
        gradients: a `BlockGradients`.
        batches: the K fixed batches.
        evaluate: the run's `run_actions.Evaluate` (its `evals`).
        loss: the held-out loss of the second measure, or None.
    """

    def __init__(self, gradients, batches, evaluate, loss=None):
        self.gradients, self.batches = gradients, batches
        self.evaluate, self.loss = evaluate, loss
        self.at_init = self.at_loss = None
        self.loss_step = self.loss_reached = None

    def measure_now(self):
        self.at_init = self.gradients.measure(self.batches)

    def on_step_end(self, step, logs):
        if self.loss is None or self.at_loss is not None or not self.evaluate.evals:
            return
        evaluated, _, loss = self.evaluate.evals[-1]
        if evaluated == step and loss <= self.loss:
            self.at_loss = self.gradients.measure(self.batches)
            self.loss_step, self.loss_reached = step, loss

    def close(self):
        """Nothing to close (the run's actions are closed alike)."""

    def record(self):
        at_loss = self.at_loss or {}
        return {
            "gradient_variance_batches": len(self.batches),
            "gradient_variance_init": self.at_init["variance"],
            "gradient_mean_square_init": self.at_init["mean_square"],
            "gradient_variance_loss": self.loss,
            "gradient_variance_loss_step": self.loss_step,
            "gradient_variance_loss_reached": self.loss_reached,
            "gradient_variance_at_loss": at_loss.get("variance"),
            "gradient_mean_square_at_loss": at_loss.get("mean_square"),
        }


def gradient_variance_action(trainer, task, seed, evaluate, loss):
    """A run's `GradientVariance`, its first measure taken now (initialisation).

    Its K batches (`trainer.cfg.gradient_variance_batches`) are drawn for
    the seed alone, so every variant of a seed is measured on the same
    batches. `loss(targets, logits, weights)` is the training loss.
    """
    cfg = trainer.cfg
    rng = np.random.default_rng(30_000 + seed)
    batches = [
        task.batch(rng, cfg.batch_size) for _ in range(cfg.gradient_variance_batches)
    ]

    def loss_fn(model, tokens, targets, weights):
        return loss(targets, model(tokens, training=True), weights)

    gradients = BlockGradients(
        trainer.model, trainer.block_groups, loss_fn, trainer.optimizer
    )
    action = GradientVariance(gradients, batches, evaluate, cfg.gradient_variance_loss)
    action.measure_now()
    return action


def gradient_variance_summary(runs):
    """One variant's figures over its seeds' `runs`: the mean over seeds of
    each run's mean over blocks, at initialisation and at the loss (over
    the seeds that reached it), and the noise-to-signal ratio
    (variance / mean square, each averaged over blocks first)."""
    if not runs or "gradient_variance_init" not in runs[0]:
        return {}
    reached = [r for r in runs if r["gradient_variance_at_loss"] is not None]
    return {
        "gradient_variance_init_mean": _mean_of_means(runs, "gradient_variance_init"),
        "gradient_noise_ratio_init_mean": _ratio(runs, "init"),
        "seeds_reaching_gradient_variance_loss": len(reached),
        "gradient_variance_at_loss_mean": _mean_of_means(
            reached, "gradient_variance_at_loss"
        ),
        "gradient_noise_ratio_at_loss_mean": _ratio(reached, "at_loss"),
    }


def _mean_of_means(runs, key):
    if not runs:
        return None
    return float(np.mean([np.mean(run[key]) for run in runs]))


def _ratio(runs, when):
    ratios = []
    for run in runs:
        signal = float(np.mean(run[f"gradient_mean_square_{when}"]))
        noise = float(np.mean(run[f"gradient_variance_{when}"]))
        ratios.append(noise / signal if signal > 0 else math.inf)
    return float(np.mean(ratios)) if ratios else None


def gradient_variance_table(rows):
    """The Markdown table of `gradient_variance_summary`'s columns of
    `rows` (one per variant), or "" when the variance was not measured."""
    if not rows or "gradient_variance_init_mean" not in rows[0]:
        return ""
    columns = [
        "variant",
        "variance at initialisation (mean over blocks and seeds)",
        "variance / mean square at initialisation",
        "seeds reaching the loss",
        "variance at the loss",
        "variance / mean square at the loss",
    ]
    table_rows = []
    for row in rows:
        cells = [
            row["variant"],
            _number(row["gradient_variance_init_mean"]),
            _number(row["gradient_noise_ratio_init_mean"]),
            f"{row['seeds_reaching_gradient_variance_loss']}/{row['seeds']}",
            _number(row["gradient_variance_at_loss_mean"]),
            _number(row["gradient_noise_ratio_at_loss_mean"]),
        ]
        table_rows.append(cells)
    return format_markdown_table(columns, table_rows)


def _number(value):
    return "-" if value is None else f"{value:.3g}"

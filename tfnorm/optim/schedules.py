"""`WarmupSchedule`: linear learning-rate warm-up followed by a decay."""

from __future__ import annotations

import math

from tfnorm._checks import (
    check_choice,
    check_int,
    check_number,
    check_positive_int,
)
from tfnorm._keras import keras, register_serializable, tf
from tfnorm.choices import DECAYS

# Decays that need to know where training ends.
_DECAYS_WITH_END = ("cosine", "linear")


@register_serializable
class WarmupSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to `peak_lr`, then a decay towards `final_lr`.

    Post-LN Transformers diverge or stall without a warm-up, while Pre-LN ones
    usually train without it (Xiong et al., 2020); this schedule provides the
    warm-up and the usual decays after it. Steps count from 0, as
    `optimizer.iterations` does, so the first step already uses a non-zero
    rate and step `warmup_steps - 1` uses `peak_lr`.

    Reference: [Xiong et al., 2020, "On Layer Normalization in the Transformer
    Architecture"](https://arxiv.org/abs/2002.04745).

    With `w = warmup_steps`, `T = total_steps` and `s` the step:

    ```
    warm-up (s < w):   lr = peak_lr * (s + 1) / w
    then, with p = clip((s - w) / (T - w), 0, 1):
      "cosine":        lr = final_lr + (peak_lr - final_lr) * (1 + cos(pi * p)) / 2
      "linear":        lr = peak_lr + (final_lr - peak_lr) * p
      "inverse_sqrt":  lr = max(final_lr, peak_lr * sqrt(max(w, 1) / (s + 1)))
      "constant":      lr = peak_lr
    ```

    After `total_steps` the cosine and linear decays stay at `final_lr`.

    Example:

    >>> import tfnorm
    >>> schedule = tfnorm.training.WarmupSchedule(1e-3, 10, total_steps=100)
    >>> round(float(schedule(9)), 6)
    0.001

    Args:
        peak_lr: float > 0, the rate reached at the end of the warm-up.
        warmup_steps: int >= 0, the number of warm-up steps. 0 means no
            warm-up.
        total_steps: int, the step at which the cosine or linear decay reaches
            `final_lr`; must be >= `warmup_steps`. May be None for the
            "inverse_sqrt" and "constant" decays, which do not end.
        decay: one of "cosine", "linear", "inverse_sqrt", "constant".
            Defaults to "cosine".
        final_lr: float in [0, peak_lr], the floor of the decay. Defaults to
            0.0.
        name: optional name for the ops.
    """

    def __init__(
        self,
        peak_lr,
        warmup_steps,
        total_steps=None,
        decay="cosine",
        final_lr=0.0,
        name=None,
    ):
        super().__init__()
        self.decay = check_choice("decay", decay, DECAYS)
        self.peak_lr = check_number("peak_lr", peak_lr, above=0.0)
        self.warmup_steps = check_int("warmup_steps", warmup_steps, minimum=0)
        if total_steps is None:
            if decay in _DECAYS_WITH_END:
                raise ValueError(
                    f'decay="{decay}" needs `total_steps`. Received: total_steps=None'
                )
        elif check_positive_int("total_steps", total_steps) < warmup_steps:
            raise ValueError(
                "`total_steps` must be >= `warmup_steps`. Received: "
                f"total_steps={total_steps}, warmup_steps={warmup_steps}"
            )
        self.total_steps = None if total_steps is None else int(total_steps)
        self.final_lr = check_number("final_lr", final_lr, 0.0, self.peak_lr)
        self.name = name

    def __call__(self, step):
        with tf.name_scope(self.name or "WarmupSchedule"):
            step = tf.cast(tf.convert_to_tensor(step), tf.float32)
            peak = tf.constant(self.peak_lr, tf.float32)
            final = tf.constant(self.final_lr, tf.float32)
            warmup = float(self.warmup_steps)
            after = self._after_warmup(step, peak, final, warmup)
            if self.warmup_steps == 0:
                return after
            warming = peak * (step + 1.0) / warmup
            return tf.where(step < warmup, warming, after)

    def _after_warmup(self, step, peak, final, warmup):
        if self.decay == "constant":
            return peak + 0.0 * step
        if self.decay == "inverse_sqrt":
            return tf.maximum(final, peak * tf.sqrt(max(warmup, 1.0) / (step + 1.0)))
        span = float(max(self.total_steps - self.warmup_steps, 1))
        progress = tf.clip_by_value((step - warmup) / span, 0.0, 1.0)
        if self.decay == "linear":
            return peak + (final - peak) * progress
        return final + (peak - final) * 0.5 * (1.0 + tf.cos(math.pi * progress))

    def get_config(self):
        return {
            "peak_lr": self.peak_lr,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
            "decay": self.decay,
            "final_lr": self.final_lr,
            "name": self.name,
        }

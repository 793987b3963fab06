"""The mixed-precision switch: float32, float16 with loss scaling, bfloat16."""

from __future__ import annotations

from tfnorm import _keras
from tfnorm._checks import precision_mode
from tfnorm.choices import PRECISION_POLICIES


def policy_name(mode) -> str:
    """The Keras policy name for `mode` (see `set_mixed_precision`)."""
    return PRECISION_POLICIES[precision_mode(mode, name="mode")]


def set_mixed_precision(mode):
    """Sets the global Keras dtype policy for training.

    * None or "float32": everything in float32.
    * "float16": the "mixed_float16" policy — float16 computation, float32
      variables. float16's small range makes small gradients underflow to 0,
      so the optimizer must be wrapped with dynamic loss scaling:
      `wrap_for_mixed_precision(optimizer)`.
    * "bfloat16": the "mixed_bfloat16" policy; bfloat16 has float32's range,
      so no loss scaling is needed (and on CPUs it brings no speed-up).

    tfnorm's norm layers keep their statistics and γ/β in float32 under both
    mixed policies. Layers created before the call keep their old policy, so
    call this before building the model.

    Example:

    >>> import tfnorm
    >>> tfnorm.training.set_mixed_precision("bfloat16")
    'mixed_bfloat16'
    >>> tfnorm.training.set_mixed_precision(None)
    'float32'

    Args:
        mode: None, "float32", "float16" or "bfloat16".

    Returns:
        The name of the policy now in effect.
    """
    name = policy_name(mode)
    _keras.set_global_policy(name)
    return name


def needs_loss_scaling(mode="current") -> bool:
    """True when `mode` (default: the global policy in effect) computes in float16."""
    name = _keras.global_policy_name() if mode == "current" else policy_name(mode)
    return name == "mixed_float16"


def wrap_for_mixed_precision(optimizer, mode="current"):
    """Wraps `optimizer` in dynamic loss scaling when training in float16.

    Returns `optimizer` unchanged for float32 and bfloat16, and an optimizer
    that is already loss-scaled unchanged too, so calling it twice is safe.

    Args:
        optimizer: a Keras optimizer.
        mode: the precision mode as for `set_mixed_precision`; defaults to the
            global policy in effect.
    """
    if not needs_loss_scaling(mode) or _keras.is_loss_scaled(optimizer):
        return optimizer
    return _keras.loss_scale_optimizer(optimizer)

"""Gradient clipping by global norm, over all gradients or with the norms' own weights apart.

`tfnorm compare --clipnorm C` rescales a step's gradients so that their
global L2 norm is at most C (`clip_groups` "global", as
`tf.clip_by_global_norm` and Keras's `global_clipnorm`); with
`--clip-groups separate` the normalisation layers' weights (gamma, beta,
scale) form a group of their own: each group's norm is measured and
clipped to C apart from the other, so that a large gradient in one does
not shrink the other's step (the separate treatment of gamma/beta the
seed articles recommend; claim 12 of docs/claims.md).

The threshold applies to the gradients without the loss scale: under
Keras 3's `LossScaleOptimizer` the loop's gradients still carry it
(`tfnorm._keras.gradient_scale`), so the threshold is scaled with them.
A non-finite gradient makes its group's norm non-finite and every clipped
gradient of the group NaN, which a loss-scaled optimizer then skips, as
it would the unclipped step.
"""

from __future__ import annotations

from tfnorm._keras import dense_gradients, gradient_scale, tf, variable_path
from tfnorm.choices import CLIP_GROUPS
from tfnorm.optim.optimizers import norm_variable_paths


def clip_groups_of(model, variables, clip_groups):
    """The groups whose global norms are clipped apart, as index lists into
    `variables`: every variable (`"global"`), or the weights of `model`'s
    norm layers and the others (`"separate"`; an empty group is left out)."""
    if clip_groups not in CLIP_GROUPS:
        raise ValueError(
            f"`clip_groups` must be one of {CLIP_GROUPS}. Received: "
            f"clip_groups={clip_groups!r}"
        )
    everything = list(range(len(variables)))
    if clip_groups == "global":
        return [everything]
    norm_paths = norm_variable_paths(model)
    is_norm = [variable_path(v) in norm_paths for v in variables]
    norms = [i for i in everything if is_norm[i]]
    others = [i for i in everything if not is_norm[i]]
    return [group for group in (norms, others) if group]


def clip_by_groups(gradients, groups, clipnorm, carried_scale=1.0):
    """`gradients` with each group's global L2 norm clipped to `clipnorm`.

    Args:
        gradients: one gradient (or None) per variable.
        groups: index lists into `gradients` (`clip_groups_of`).
        clipnorm: the largest global norm a group keeps, without the loss
            scale.
        carried_scale: the loss scale the gradients still carry (1 when
            they carry none).

    Returns:
        The list of gradients, clipped group by group (dense; None kept).
    """
    # An embedding's gradient arrives as slices with a row per token of the
    # batch; the norm of the rows is not the norm of the gradient applied
    # (a token seen twice sums its rows).
    gradients = dense_gradients(gradients)
    clipped = list(gradients)
    threshold = tf.cast(clipnorm, tf.float32) * tf.cast(carried_scale, tf.float32)
    for group in groups:
        present = [i for i in group if gradients[i] is not None]
        if not present:
            continue
        values, _ = tf.clip_by_global_norm([gradients[i] for i in present], threshold)
        for i, value in zip(present, values):
            clipped[i] = value
    return clipped


def gradient_clipper(model, optimizer, clipnorm, clip_groups):
    """`clip(gradients)` for a training step of `optimizer` on `model`'s
    trainable variables, given the gradients as the loop hands them to the
    optimizer (`tfnorm._keras.unscale_gradients`): `clip_by_groups` with
    `clip_groups_of`'s groups and the loss scale they still carry, or the
    gradients unchanged when `clipnorm` is None (no clipping)."""
    if not clipnorm:
        return lambda gradients: gradients
    groups = clip_groups_of(model, model.trainable_variables, clip_groups)
    return lambda gradients: clip_by_groups(
        gradients, groups, clipnorm, gradient_scale(optimizer)
    )

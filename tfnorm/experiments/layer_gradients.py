"""Per-block gradient norms during training, and how much they vary.

The articles behind tfnorm claim that Pre-LN "lowers the gradient variance of
deep stacks". Xiong et al. (2020) give the mechanism: at initialisation a
Post-LN stack's gradients grow towards the output and do not shrink with
depth, while Pre-LN's are about even across blocks. `tfnorm compare` measures
it during training, at every `eval_every`-th step, from the gradients that
step applies (no extra pass):

```
G[t, l] = ||d loss / d theta_l||_2     theta_l: every trainable weight of block l
across layers = mean_t Var_l G[t, l]   (how uneven the stack is, on average)
over time     = mean_l Var_t G[t, l]   (how much each block's gradient moves)
cv            = mean_t Std_l G[t, l] / Mean_l G[t, l]
```

Variances are population variances (ddof 0). "Across layers" is the figure
the claim is read as: the variance of the per-layer gradient norms is what
depth makes large in Post-LN. "Over time" is the other reading (spikes during
training); `cv` is the across-layers spread without the gradients' overall
scale, which differs between the two positions.

Reference: [Xiong et al., 2020, "On Layer Normalization in the Transformer
Architecture"](https://arxiv.org/abs/2002.04745).
"""

from __future__ import annotations

import numpy as np

from tfnorm import _keras
from tfnorm._keras import tf


def block_variable_groups(model, blocks):
    """For each block, the indices of its weights in `model.trainable_variables`.

    Args:
        model: the trained `keras.Model`.
        blocks: the stack's blocks (layers inside `model`), bottom first.

    Returns:
        A list of lists of ints, one per block.
    """
    position = {id(v): i for i, v in enumerate(model.trainable_variables)}
    groups = []
    for block in blocks:
        indices = [position[id(v)] for v in block.trainable_variables]
        if not indices:
            raise ValueError(
                f"Block {block.name!r} has no trainable weights in model "
                f"{model.name!r}. Received: blocks={[b.name for b in blocks]}"
            )
        groups.append(indices)
    return groups


def stack_blocks(stack):
    """The blocks of a `tfnorm` encoder or decoder stack (`block_0` ...), in order."""
    blocks = [layer for layer in stack.layers if layer.name.startswith("block_")]
    return sorted(blocks, key=lambda layer: int(layer.name.split("_")[-1]))


def per_block_norms(gradients, groups):
    """A vector: the l2 norm of each group's gradients (inside a step)."""
    # `global_norm` skips a weight without a gradient (None).
    return tf.stack(
        [_keras.global_norm([gradients[i] for i in group]) for group in groups]
    )


def gradient_spread(norms):
    """The spread figures of one run's recorded per-block gradient norms.

    Args:
        norms: `G`, a list (recorded steps) of lists (blocks) of floats.

    Returns:
        A dict with `layer_gradient_variance_across_layers`,
        `layer_gradient_variance_over_time` and `layer_gradient_cv_across_layers`
        (see the module's docstring); NaN when a norm is not finite (a
        diverged run), or when fewer than two steps were recorded (over time).
    """
    grid = np.asarray(norms, dtype=np.float64)
    if grid.ndim != 2 or grid.size == 0:
        raise ValueError(
            "`norms` must be a non-empty list of per-block lists. "
            f"Received: norms with shape {grid.shape}"
        )
    nan = float("nan")
    over_time = nan
    if grid.shape[0] > 1:
        over_time = float(np.mean(np.var(grid, axis=0)))
    means = np.mean(grid, axis=1)
    return {
        "layer_gradient_variance_across_layers": float(np.mean(np.var(grid, axis=1))),
        "layer_gradient_variance_over_time": over_time,
        "layer_gradient_cv_across_layers": float(
            np.mean(np.std(grid, axis=1) / np.where(means > 0, means, nan))
        ),
    }


SPREAD_KEYS = (
    "layer_gradient_variance_across_layers",
    "layer_gradient_variance_over_time",
    "layer_gradient_cv_across_layers",
)


def spread_over_seeds(runs):
    """Each spread figure's mean over `runs` (the seeds of one variant)."""
    return {
        key: float(np.mean([run[key] for run in runs]))
        for key in SPREAD_KEYS
        if all(key in run for run in runs)
    }

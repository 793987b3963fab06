"""The literature's result on gradients at initialisation, reproduced.

Xiong et al. 2020, "On Layer Normalization in the Transformer Architecture"
(arXiv 2002.04745), Theorem 1: the gradient of the last layer's FFN weights
shrinks like 1/sqrt(L) with the depth L for Pre-LN and does not shrink for
Post-LN. Measured with `ffn_gradient_norms_at_init` (cross-entropy over a
random vocabulary projection, random inputs and targets).

Margins were set from measurements here, the same in every runtime (keras3,
legacy tf_keras, tf29); docs/experiments.md has the per-runtime figures:
- tiny width (d=32, 2 heads, dff 64, seq 8, batch 8), seed 0: depth-2 /
  depth-16 last-layer ratio 2.25-2.88 for Pre-LN, 0.71-0.94 for Post-LN;
  Pre-LN 16-layer last/first 0.24-0.29.
- the paper-like setting (d=64, 4 heads, dff 256, seq 16, batch 16), seeds
  0-15 in each runtime: Pre-LN 1.82-2.73, Post-LN 0.49-0.96.
- 12-layer profiles, seeds 0-15 per runtime: Pre-LN last/first 0.24-0.40,
  top/bottom half 0.46-0.62, on every draw. Post-LN's profile varies much
  more from one initialisation to the next: last/first 0.34-2.04 (tf29),
  0.48-1.34 (legacy), 0.64-1.41 (keras3), 0.34-1.59 over 40 draws of plain
  NumPy glorot weights (the runtimes compute identical gradients from
  identical weights). About one draw in six falls outside the "roughly
  flat" margins below (7 of the 48 runtime draws, 7 of the 40 NumPy ones),
  so the profile test averages DRAWS initialisations per seed: Post-LN
  last/first 0.65-1.06, top/bottom 0.80-1.06 across runtimes.
"""

from __future__ import annotations

import numpy as np
import pytest

from tfnorm.experiments.gradients import ffn_gradient_norms_at_init

TINY = dict(d_model=32, num_heads=2, dff=64, seq_len=8, batch_size=8, vocab_size=50)
PAPER_LIKE = dict(
    d_model=64, num_heads=4, dff=256, seq_len=16, batch_size=16, vocab_size=100
)


def depth_profiles(seed, sizes):
    return {
        (position, depth): ffn_gradient_norms_at_init(
            depth, position, seed=seed, **sizes
        )
        for position in ("pre", "post")
        for depth in (2, 16)
    }


def assert_depth_effect(profiles):
    pre_ratio = profiles["pre", 2][-1] / profiles["pre", 16][-1]
    post_ratio = profiles["post", 2][-1] / profiles["post", 16][-1]
    # Pre-LN: 1/sqrt(L) predicts sqrt(8) = 2.83 for depths 2 and 16.
    assert 1.7 < pre_ratio < 4.0, pre_ratio
    # Post-LN: no shrinking with depth ("about 1 or below").
    assert post_ratio < 1.3, post_ratio
    assert pre_ratio > 1.6 * post_ratio, (pre_ratio, post_ratio)
    # Within the 16-layer Pre-LN stack the gradient falls from the first
    # block to the last.
    pre16 = profiles["pre", 16]
    assert pre16[-1] / pre16[0] < 0.5, pre16


def test_last_layer_gradient_shrinks_with_depth_for_pre_ln_only():
    assert_depth_effect(depth_profiles(seed=0, sizes=TINY))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_depth_effect_at_paper_like_width(seed):
    assert_depth_effect(depth_profiles(seed=seed, sizes=PAPER_LIKE))


#: Initialisations averaged per seed in the 12-layer profile test.
DRAWS = 4


def mean_profile(num_layers, position, seed):
    """Gradient norms per layer, averaged over DRAWS initialisations.

    Xiong et al.'s result is about the expectation over initialisations;
    seed `s` averages seeds `DRAWS * s ... DRAWS * s + DRAWS - 1`.
    """
    return np.mean(
        [
            ffn_gradient_norms_at_init(
                num_layers, position, seed=DRAWS * seed + draw, **PAPER_LIKE
            )
            for draw in range(DRAWS)
        ],
        axis=0,
    )


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_twelve_layer_profiles(seed):
    pre = mean_profile(12, "pre", seed)
    post = mean_profile(12, "post", seed)
    # Pre-LN falls from the first layer to the last, and its top half gets
    # less gradient than its bottom half.
    assert pre[-1] / pre[0] < 0.5, pre
    assert pre[6:].mean() / pre[:6].mean() < 0.75, pre
    # Post-LN stays roughly flat.
    assert 0.6 < post[-1] / post[0] < 1.6, post
    assert 0.7 < post[6:].mean() / post[:6].mean() < 1.5, post
    # At the last layer Post-LN's gradient is well above Pre-LN's.
    assert post[-1] / pre[-1] > 2.0, (post[-1], pre[-1])


def test_profile_has_one_positive_norm_per_layer():
    norms = ffn_gradient_norms_at_init(3, "sandwich", seed=0, **TINY)
    assert norms.shape == (3,)
    assert np.all(np.isfinite(norms)) and np.all(norms > 0)

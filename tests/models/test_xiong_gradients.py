"""The literature's result on gradients at initialisation, reproduced.

Xiong et al. 2020, "On Layer Normalization in the Transformer Architecture"
(arXiv 2002.04745), Theorem 1: the gradient of the last layer's FFN weights
shrinks like 1/sqrt(L) with the depth L for Pre-LN and does not shrink for
Post-LN. Measured with `ffn_gradient_norms_at_init` (cross-entropy over a
random vocabulary projection, random inputs and targets).

Margins were set from measurements here (keras3 runtime):
- tiny width (d=32, 2 heads, dff 64, seq 8, batch 8), seeds 0-5: depth-2 /
  depth-16 last-layer ratio 2.12-2.88 for Pre-LN, 0.76-1.04 for Post-LN;
  Pre-LN 16-layer last/first 0.21-0.29.
- the paper-like setting (d=64, 4 heads, dff 256, seq 16, batch 16), seeds
  0-2: Pre-LN 2.12-2.37, Post-LN 0.56-0.71; 12-layer last/first 0.27-0.34
  (Pre-LN) and 0.81-0.93 (Post-LN).
"""

from __future__ import annotations

import numpy as np
import pytest

from tfnorm.models.gradients import ffn_gradient_norms_at_init

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


# Slow, and margins calibrated in the keras3 runtime: under Keras 2 (tf_keras,
# TF 2.9) the paper-width Pre-LN effect is weaker (depth ratio 1.60-1.68,
# 12-layer last/first 0.51-0.59 against 0.27-0.34 in Keras 3; probably Keras
# 2's different fan-in for MultiHeadAttention's 3-D kernels), while the
# tiny-width test above holds in all runtimes.
@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_depth_effect_at_paper_like_width(seed):
    assert_depth_effect(depth_profiles(seed=seed, sizes=PAPER_LIKE))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_twelve_layer_profiles(seed):
    pre = ffn_gradient_norms_at_init(12, "pre", seed=seed, **PAPER_LIKE)
    post = ffn_gradient_norms_at_init(12, "post", seed=seed, **PAPER_LIKE)
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

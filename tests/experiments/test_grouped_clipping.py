"""`tfnorm.experiments.grouped_clipping`: the norms' weights clipped apart
from the rest, at a threshold without the loss scale, and `tfnorm compare
--clipnorm` applying it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

import tfnorm
from tfnorm._keras import keras
from tfnorm.cli.main import main
from tfnorm.experiments.grouped_clipping import (
    clip_by_groups,
    clip_groups_of,
    gradient_clipper,
)
from tfnorm.optim.optimizers import norm_variable_paths


def _global_norm(tensors):
    return float(tf.linalg.global_norm(tensors))


def test_separate_groups_are_the_norms_weights_and_the_others():
    model = tfnorm.build_decoder(
        2, 8, 2, 16, vocab_size=11, max_len=4, preset="gpt2", dropout_rate=0.0
    )
    variables = model.trainable_variables
    norms, others = clip_groups_of(model, variables, "separate")
    names = [variables[i].name.split("/")[-1].split(":")[0] for i in norms]
    # Two norms per block and the final one, each with gamma and beta.
    assert len(norms) == 2 * (2 * 2 + 1) and set(names) == {"gamma", "beta"}
    assert len(norm_variable_paths(model)) == len(norms)
    assert sorted(norms + others) == list(range(len(variables)))
    assert clip_groups_of(model, variables, "global") == [list(range(len(variables)))]
    with pytest.raises(ValueError, match="Received: clip_groups='norms'"):
        clip_groups_of(model, variables, "norms")


def test_the_clipper_of_a_step_is_the_identity_without_clipnorm():
    model = tfnorm.build_decoder(
        1, 8, 2, 16, vocab_size=11, max_len=4, preset="gpt2", dropout_rate=0.0
    )
    gradients = [tf.ones_like(v) * 10.0 for v in model.trainable_variables]
    optimizer = keras.optimizers.Adam()  # no loss scale: the gradients carry 1
    assert gradient_clipper(model, optimizer, None, "global")(gradients) is gradients
    clipped = gradient_clipper(model, optimizer, 1.0, "separate")(gradients)
    groups = clip_groups_of(model, model.trainable_variables, "separate")
    for group in groups:
        assert _global_norm([clipped[i] for i in group]) == pytest.approx(1.0)


def test_each_group_is_clipped_to_the_threshold_apart_from_the_other():
    small = [tf.constant([3.0, 0.0])]  # norm 3
    large = [tf.constant([0.0, 40.0]), tf.constant([[30.0]])]  # norm 50
    gradients = small + large
    separate = clip_by_groups(gradients, [[0], [1, 2]], 5.0)
    np.testing.assert_allclose(separate[0], [3.0, 0.0])  # under 5: untouched
    assert _global_norm(separate[1:]) == pytest.approx(5.0)
    assert float(separate[1][1] / separate[2][0, 0]) == pytest.approx(40.0 / 30.0)
    # One global norm: the small group shrinks with the large one.
    joint = clip_by_groups(gradients, [[0, 1, 2]], 5.0)
    assert _global_norm(joint) == pytest.approx(5.0)
    assert float(joint[0][0]) == pytest.approx(3.0 * 5.0 / np.sqrt(9 + 2500))


def test_the_threshold_is_without_the_loss_scale_the_gradients_carry():
    scale = 1024.0
    gradients = [tf.constant([6.0, 8.0]) * scale, None]  # norm 10, unscaled
    clipped = clip_by_groups(gradients, [[0, 1]], 5.0, carried_scale=scale)
    np.testing.assert_allclose(clipped[0] / scale, [3.0, 4.0], rtol=1e-6)
    assert clipped[1] is None


def test_a_non_finite_gradient_spoils_its_own_group_only():
    gradients = [tf.constant([np.inf, 1.0]), tf.constant([3.0, 4.0])]
    clipped = clip_by_groups(gradients, [[0], [1]], 1.0)
    assert not np.isfinite(clipped[0].numpy()).any()
    np.testing.assert_allclose(clipped[1], [0.6, 0.8], rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("clip_groups, groups", [("global", 1), ("separate", 2)])
def test_compare_clips_every_step(tmp_path, clip_groups, groups):
    # The recorded gradient norm is that of the gradients the optimizer
    # applied: at most C with one group, sqrt(2) C with two.
    output_dir = str(tmp_path / "out")
    flags = ["--num-layers", "2", "--d-model", "8", "--num-heads", "2", "--dff", "16"]
    flags += ["--steps", "3", "--eval-every", "3", "--eval-size", "16", "--seeds", "0"]
    flags += ["--histogram-every", "0", "--no-jit", "--variants", "post"]
    flags += ["--clipnorm", "1e-3", "--clip-groups", clip_groups]
    assert main(["compare", "--output-dir", output_dir, *flags]) == 0
    with open(f"{output_dir}/results.json") as handle:
        result = json.load(handle)
    assert result["config"]["clip_groups"] == clip_groups
    (run,) = result["runs"]
    norms = run["gradient_norms"]
    assert len(norms) == 3
    assert max(norms) <= 1e-3 * np.sqrt(groups) * (1 + 1e-5)
    assert max(norms) > 0.9e-3  # an untrained model's gradients are far larger

"""The batch-to-batch gradient variance per block, `tfnorm.experiments.batch_gradients`."""

from __future__ import annotations

import numpy as np
import pytest

from tfnorm import _keras
from tfnorm._keras import keras, tf
from tfnorm.experiments.batch_gradients import (
    BlockGradients,
    GradientVariance,
    block_gradient_variance,
    gradient_variance_summary,
    gradient_variance_table,
)


def test_the_variance_is_the_mean_over_parameters_of_each_ones_sample_variance():
    # Three batches; block 0 has parameters p1 (1, 3, 5) and p2 (2, 2, 2),
    # block 1 one parameter (0, 2, 4).
    per_batch = [
        [np.array([1.0, 2.0]), np.array([0.0])],
        [np.array([3.0, 2.0]), np.array([2.0])],
        [np.array([5.0, 2.0]), np.array([4.0])],
    ]
    result = block_gradient_variance(per_batch, [[0], [1]])
    # p1: mean 3, sample variance (4 + 0 + 4) / 2 = 4; p2: 0.
    assert result["variance"] == pytest.approx([2.0, 4.0])
    # The mean gradient's squares: (3^2 + 2^2) / 2 and 2^2.
    assert result["mean_square"] == pytest.approx([6.5, 4.0])
    # One block of both variables: p1, p2 and the other (4 + 0 + 4) / 3.
    together = block_gradient_variance(per_batch, [[0, 1]])
    assert together["variance"] == pytest.approx([8.0 / 3.0])


def test_one_batch_has_no_variance():
    with pytest.raises(ValueError, match="at least two batches. Received: 1"):
        block_gradient_variance([[np.ones(2)]], [[0]])


def _linear_model():
    # loss = mean over the rows of x @ w, so d loss / d w = the rows' mean.
    inputs = keras.Input((2,))
    outputs = keras.layers.Dense(1, use_bias=False, name="dense")(inputs)
    model = keras.Model(inputs, outputs)
    model.get_layer("dense").set_weights([np.array([[0.5], [-1.0]], "float32")])
    return model


BATCHES = [
    (np.array([[1.0, 0.0], [3.0, 0.0]], "float32"),),  # gradient (2, 0)
    (np.array([[0.0, 1.0], [0.0, 1.0]], "float32"),),  # gradient (0, 1)
    (np.array([[4.0, 2.0], [0.0, 2.0]], "float32"),),  # gradient (2, 2)
]


def _mean_output(model, x):
    return tf.reduce_mean(model(x, training=True))


@pytest.mark.parametrize("scaled", [False, True])
def test_the_gradients_of_a_linear_model_give_the_hand_computed_variance(scaled):
    model = _linear_model()
    optimizer = None
    if scaled:
        # The loss scale is applied and divided out, as in a training step.
        optimizer = _keras.loss_scale_optimizer(keras.optimizers.SGD(1.0))
        _keras.build_optimizer(optimizer, model.trainable_variables)
    measured = BlockGradients(model, [[0]], _mean_output, optimizer).measure(BATCHES)
    # p1: 2, 0, 2 (mean 4/3, sample variance 4/3); p2: 0, 1, 2 (mean 1, 1).
    assert measured["variance"] == pytest.approx([7.0 / 6.0], rel=1e-5)
    assert measured["mean_square"] == pytest.approx([25.0 / 18.0], rel=1e-5)
    np.testing.assert_array_equal(model.get_weights()[0], [[0.5], [-1.0]])


def test_a_batch_norms_moving_averages_do_not_move_while_measured():
    inputs = keras.Input((2,))
    x = keras.layers.BatchNormalization(name="bn")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(1, name="dense")(x))
    before = [w.numpy() for w in model.non_trainable_variables]
    groups = [[i for i, _ in enumerate(model.trainable_variables)]]
    BlockGradients(model, groups, _mean_output).measure(BATCHES)
    for old, weight in zip(before, model.non_trainable_variables):
        np.testing.assert_array_equal(weight.numpy(), old)


class _Counting:
    """A `BlockGradients` stand-in that counts its measures."""

    def __init__(self):
        self.calls = 0

    def measure(self, batches):
        self.calls += 1
        return {"variance": [float(self.calls)], "mean_square": [2.0]}


class _Evals:
    def __init__(self):
        self.evals = []


def test_the_second_measure_is_at_the_first_evaluation_at_or_below_the_loss():
    gradients, evaluate = _Counting(), _Evals()
    action = GradientVariance(gradients, BATCHES, evaluate, loss=1.0)
    action.measure_now()
    for step, loss in [(1, None), (2, 1.5), (3, None), (4, 1.0), (6, 0.5)]:
        if loss is not None:
            evaluate.evals.append((step, 0.0, loss))
        action.on_step_end(step, {})
    record = action.record()
    assert gradients.calls == 2
    assert record["gradient_variance_init"] == [1.0]
    assert record["gradient_variance_at_loss"] == [2.0]
    assert (
        record["gradient_variance_loss_step"],
        record["gradient_variance_loss_reached"],
    ) == (4, 1.0)
    assert record["gradient_variance_batches"] == 3


def test_a_run_that_never_reaches_the_loss_keeps_the_first_measure_only():
    gradients, evaluate = _Counting(), _Evals()
    action = GradientVariance(gradients, BATCHES, evaluate, loss=0.1)
    action.measure_now()
    evaluate.evals.append((5, 0.0, 0.2))
    action.on_step_end(5, {})
    record = action.record()
    assert gradients.calls == 1 and record["gradient_variance_at_loss"] is None


def test_the_summary_averages_blocks_then_seeds():
    runs = [
        {"gradient_variance_init": [1.0, 3.0], "gradient_mean_square_init": [4.0, 4.0],
         "gradient_variance_at_loss": [0.5, 0.5], "gradient_mean_square_at_loss": [1.0, 1.0]},
        {"gradient_variance_init": [4.0, 4.0], "gradient_mean_square_init": [2.0, 2.0],
         "gradient_variance_at_loss": None, "gradient_mean_square_at_loss": None},
    ]  # fmt: skip
    summary = gradient_variance_summary(runs)
    assert summary["gradient_variance_init_mean"] == pytest.approx(3.0)
    assert summary["gradient_noise_ratio_init_mean"] == pytest.approx((0.5 + 2.0) / 2)
    assert summary["seeds_reaching_gradient_variance_loss"] == 1
    assert summary["gradient_variance_at_loss_mean"] == pytest.approx(0.5)
    assert summary["gradient_noise_ratio_at_loss_mean"] == pytest.approx(0.5)
    assert gradient_variance_summary([{"losses": []}]) == {}
    row = {"variant": "pre-LN, warm-up 60", "seeds": 2, **summary}
    table = gradient_variance_table([row]).splitlines()
    assert table[2] == "| pre-LN, warm-up 60 | 3 | 1.25 | 1/2 | 0.5 | 0.5 |"
    assert gradient_variance_table([{"variant": "pre-LN", "seeds": 2}]) == ""


@pytest.mark.slow
def test_the_gradient_variance_row_command_writes_its_figures(tmp_path):
    # docs/claims.md, second round, row 1 at a tiny size (one placement of
    # the row's two): measured at initialisation and at a loss.
    import json

    from tfnorm.cli.main import main

    output_dir = str(tmp_path / "out")
    flags = ["--num-layers", "2", "--d-model", "8", "--num-heads", "2", "--dff", "16"]
    flags += ["--steps", "6", "--eval-every", "2", "--eval-size", "16"]
    flags += ["--histogram-every", "0", "--no-jit", "--seeds", "0"]
    flags += ["--variants", "post:1", "--gradient-variance-batches", "4"]
    flags += ["--gradient-variance-loss", "100"]
    assert main(["compare", "--output-dir", output_dir, *flags]) == 0
    with open(f"{output_dir}/results.json") as handle:
        result = json.load(handle)
    for run in result["runs"]:
        assert len(run["gradient_variance_init"]) == 2  # one per block
        assert run["gradient_variance_loss_step"] == 2  # the first evaluation
        assert all(v > 0 for v in run["gradient_variance_at_loss"])
    assert all(
        row["seeds_reaching_gradient_variance_loss"] == 1 for row in result["table"]
    )
    with open(f"{output_dir}/results.md") as handle:
        assert "Batch-to-batch gradient variance per block" in handle.read()

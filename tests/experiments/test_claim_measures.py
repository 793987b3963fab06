"""What `tfnorm compare` measures for its controls, `tfnorm.experiments.claim_measures`."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tfnorm
from tfnorm._keras import keras, tf
from tfnorm.experiments import claim_measures, controls

TOKENS = np.array([[1, 2, 3, 0], [3, 3, 1, 2]], "int32")


def _token_model(norm):
    tokens = keras.Input((4,), dtype="int32")
    x = keras.layers.Embedding(4, 8, name="embedding")(tokens)
    x = norm(x)
    logits = keras.layers.Dense(4, name="logits")(x)
    model = keras.Model(tokens, logits)
    table = np.random.default_rng(0).normal(size=(4, 8)).astype("float32")
    table[0] = 0.0  # token 0 embeds as an all-zero row
    model.get_layer("embedding").set_weights([table])
    return model


def test_the_watch_names_the_first_broken_norm_at_the_first_nonfinite_loss(
    mixed_policy,
):
    mixed_policy("mixed_float16")
    model = _token_model(controls.ComputeDtypeLayerNorm(epsilon=1e-8, name="ln16"))
    watch = claim_measures.NonFiniteWatch(model)
    batch = (TOKENS, TOKENS, np.ones((2, 4), "float32"))

    def step(number, loss, gradient_norm, applied):
        logs = {"loss": loss, "gradient_norm": gradient_norm, "applied": applied}
        watch.on_step_end(number, dict(logs, batch=batch))

    step(1, 2.0, 1.0, True)
    step(2, 2.0, math.inf, False)
    step(3, math.nan, math.nan, False)
    # Applied with a NaN gradient: not a skipped step, though its norm is NaN.
    step(5, math.nan, math.nan, True)
    record = watch.record()
    assert record["nonfinite_loss_steps"] == [3, 5]
    assert record["skipped_steps"] == [2, 3]
    assert record["nonfinite_gradient_steps"] == [2, 3, 5]
    assert record["first_broken_norm"] == "ln16"
    assert record["first_broken_norm_statistic"] == "outputs/nonfinite_fraction"
    assert record["health_problems"][0]["step"] == 3
    # Step 2 was skipped with a finite loss: probed there too.
    assert record["first_broken_norm_at_overflow"] == "ln16"
    assert record["overflow_health_problems"][0]["step"] == 2


def test_a_finite_run_names_no_norm():
    model = _token_model(tfnorm.LayerNormalization(epsilon=1e-8, name="ln"))
    watch = claim_measures.NonFiniteWatch(model)
    batch = (TOKENS, TOKENS, np.ones((2, 4), "float32"))
    watch.on_step_end(
        1, {"loss": 2.0, "gradient_norm": 1.0, "applied": True, "batch": batch}
    )
    record = watch.record()
    assert record["skipped_steps"] == [] and record["nonfinite_loss_steps"] == []
    assert record["first_broken_norm"] is None


def _reference(model, data, training):
    tokens, targets, weights = data
    logits = model(tokens, training=training)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits)
    return float(tf.reduce_sum(losses * weights) / weights.sum())


def test_batch_statistics_evaluation_runs_after_the_last_step_only():
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 4, (6, 4)).astype("int32")
    data = (
        tokens,
        tokens[:, ::-1].copy(),
        rng.integers(0, 2, (6, 4)).astype("float32"),
    )
    model = _token_model(tfnorm.LayerNormalization(name="ln"))
    evaluation = claim_measures.BatchStatisticsEvaluation(model, data, 4, total_steps=2)
    evaluation.on_step_end(1, {})
    assert evaluation.record()["eval_loss_batch_statistics"] is None
    evaluation.on_step_end(2, {})
    # A row-wise norm without dropout: training mode changes nothing.
    loss = evaluation.record()["eval_loss_batch_statistics"]
    assert loss == pytest.approx(_reference(model, data, False), rel=1e-5)


def test_batch_statistics_evaluation_sees_the_batch_norm_gap():
    rng = np.random.default_rng(2)
    tokens = rng.integers(0, 4, (6, 4)).astype("int32")
    data = (tokens, tokens, np.ones((6, 4), "float32"))
    model = _token_model(controls.MaskedBatchNorm(name="bn"))
    evaluation = claim_measures.BatchStatisticsEvaluation(model, data, 3, total_steps=1)
    # Fresh moving averages (mean 0, variance 1) against batch statistics.
    inference = _reference(model, data, False)
    evaluation.on_step_end(1, {})
    assert evaluation.record()["eval_loss_batch_statistics"] != pytest.approx(
        inference, rel=1e-3
    )


def _run(variant, seed, nonfinite, layer, gap_loss):
    return {
        "variant": variant,
        "seed": seed,
        "nonfinite_loss_steps": nonfinite,
        "skipped_steps": [1, 2],
        "nonfinite_gradient_steps": [1, 2, 3],
        # A weight went non-finite at step 3 and stayed so.
        "nonfinite_weight_steps": [3, 4] if seed == 0 else [],
        "first_broken_norm": layer,
        "first_broken_norm_at_overflow": "encoder/block_0/attention_norm"
        if layer
        else None,
        "final_eval_loss": 1.0,
        "eval_loss_batch_statistics": gap_loss,
        "eval_accuracy_batch_statistics": 0.5,
    }


def test_the_controls_table_sums_over_seeds():
    runs = [
        _run("pre-LN, no warm-up", 0, [7, 9], "encoder/block_3/ffn_norm", 0.25),
        _run("pre-LN, no warm-up", 1, [4], "encoder/block_2/ffn_norm", 0.75),
        _run("pre-LN, no warm-up", 2, [], None, math.nan),
    ]
    summary = claim_measures.control_summary(runs)
    assert summary["seeds_with_nonfinite_loss"] == 2
    assert summary["first_nonfinite_step"] == 4
    assert summary["nonfinite_loss_steps_total"] == 3
    assert summary["skipped_steps_total"] == 6
    assert summary["applied_nonfinite_gradient_steps_total"] == 3
    assert summary["nonfinite_weight_steps_total"] == 2
    assert summary["first_broken_norms"] == [
        "encoder/block_2/ffn_norm",
        "encoder/block_3/ffn_norm",
    ]
    assert summary["first_broken_norms_at_overflow"] == [
        "encoder/block_0/attention_norm"
    ]
    assert summary["train_inference_gap_mean"] == pytest.approx(0.5)
    row = {
        "variant": "pre-LN, no warm-up",
        "seeds": 3,
        "final_eval_loss_mean": 1.0,
        "final_accuracy_mean": 0.4,
        **summary,
    }
    table = claim_measures.controls_table([row]).splitlines()
    assert len(table) == 3
    assert (
        "| 2/3 | 4 | 3 | 6 | 3 | 2 | encoder/block_2/ffn_norm, encoder/block_3/ffn_norm "
        "| encoder/block_0/attention_norm |" in table[2]
    )


def _compare(tmp_path, *flags):
    import json
    import os

    from tfnorm.cli.main import main

    output_dir = str(tmp_path / "out")
    small = ["--num-layers", "4", "--d-model", "16", "--num-heads", "2", "--dff", "32"]
    small += ["--steps", "30", "--warmup-steps", "5", "--eval-size", "32"]
    small += ["--eval-every", "10", "--histogram-every", "10", "--seeds", "0", "1"]
    assert main(["compare", "--output-dir", output_dir, *small, *flags]) == 0
    paths = {name: os.path.join(output_dir, name) for name in os.listdir(output_dir)}
    assert {"results.md", "results.csv", "results.json", "comparison.png"} <= set(paths)
    with open(paths["results.md"]) as f:
        assert "first broken norm (health monitor)" in f.read()
    with open(paths["results.json"]) as f:
        return json.load(f)


@pytest.mark.slow
def test_the_epsilon_claims_experiment_writes_its_figures(tmp_path):
    # Claim: an epsilon below 1e-6 gives NaNs in deep float16 layers.
    result = _compare(
        tmp_path,
        "--mixed-precision", "float16",
        "--statistics", "compute",
        "--epsilon", "1e-8",
        "--variants", "pre",
    )  # fmt: skip
    (row,) = result["table"]
    assert row["seeds"] == 2 and "first_nonfinite_step" in row
    assert all("nonfinite_loss_steps" in run for run in result["runs"])


@pytest.mark.slow
def test_the_batch_norm_claims_experiment_writes_its_figures(tmp_path):
    # Claim: BatchNorm breaks on padded variable-length batches and small batches.
    result = _compare(
        tmp_path,
        "--norm", "batch",
        "--variable-length",
        "--batch-size", "2",
        "--variants", "pre",
    )  # fmt: skip
    (row,) = result["table"]
    assert row["eval_loss_batch_statistics_mean"] is not None
    assert row["train_inference_gap_mean"] is not None


def test_the_step_trace_keeps_every_steps_scale_decision_and_finiteness(tmp_path):
    trace = claim_measures.StepTrace()
    for scale, applied, finite in [(4.0, True, True), (4.0, False, True),
                                   (2.0, True, False), (2.0, True, False)]:  # fmt: skip
        logs = {"loss_scale": scale, "applied": applied, "weights_finite": finite}
        trace.on_step_end(len(trace.applied) + 1, logs)
    record = trace.record()
    assert record["loss_scales"] == [4.0, 4.0, 2.0, 2.0]
    assert record["applied"] == [True, False, True, True]
    assert record["nonfinite_weight_steps"] == [3, 4]
    run = {"variant": "pre-LN, no warm-up", "seed": 1, "losses": [2.0, 1.5, 1.0, 0.5],
           "gradient_norms": [1.0, math.inf, 0.5, math.nan], **record}  # fmt: skip
    path = str(tmp_path / "steps.csv")
    claim_measures.write_step_table(path, [run])
    with open(path) as handle:
        lines = handle.read().splitlines()
    assert lines[0] == ",".join(claim_measures.STEP_COLUMNS)
    assert lines[2] == '"pre-LN, no warm-up",1,2,1.5,inf,4.0,0,1'
    assert lines[4] == '"pre-LN, no warm-up",1,4,0.5,nan,2.0,1,0'


def test_weights_finite_sees_a_non_trainable_weight_too():
    model = _token_model(controls.MaskedBatchNorm(name="bn"))
    assert bool(claim_measures.weights_finite(model))
    moving = model.get_layer("bn").batch_norm.moving_variance
    moving.assign(tf.fill(moving.shape, math.inf))
    assert not bool(claim_measures.weights_finite(model))


@pytest.mark.slow
def test_the_float16_epsilon_row_command_records_every_step(tmp_path):
    # docs/claims.md, second round, row 3 at a tiny size: small-variance
    # embeddings, the layered epsilon, float16 statistics, without XLA.
    import json

    from tfnorm.cli.main import main

    output_dir = str(tmp_path / "out")
    flags = ["--num-layers", "2", "--d-model", "8", "--num-heads", "2", "--dff", "16"]
    flags += ["--steps", "4", "--eval-every", "2", "--eval-size", "16", "--seeds", "0"]
    flags += ["--histogram-every", "0", "--no-jit", "--variants", "pre"]
    flags += ["--mixed-precision", "float16", "--statistics", "compute"]
    flags += ["--embedding-std", "1e-4", "--epsilon", "1e-7", "--deep-epsilon", "1e-5"]
    assert main(["compare", "--output-dir", output_dir, *flags]) == 0
    with open(f"{output_dir}/results.json") as handle:
        (run,) = json.load(handle)["runs"]
    assert (
        len(run["loss_scales"])
        == len(run["applied"])
        == len(run["weights_finite"])
        == 4
    )
    # The loss scale halves after each skipped step and only then.
    for step in range(3):
        factor = 1.0 if run["applied"][step] else 0.5
        assert run["loss_scales"][step + 1] == run["loss_scales"][step] * factor
    with open(f"{output_dir}/steps.csv") as handle:
        assert len(handle.read().splitlines()) == 5


@pytest.mark.slow
def test_the_batch_norm_padding_row_command_counts_the_padding(tmp_path):
    # docs/claims.md, second round, row 5 at a tiny size: padding counted in
    # BatchNorm's statistics, with a momentum for a short run.
    import json

    from tfnorm.cli.main import main

    output_dir = str(tmp_path / "out")
    flags = ["--num-layers", "2", "--d-model", "8", "--num-heads", "2", "--dff", "16"]
    flags += ["--steps", "4", "--eval-every", "2", "--eval-size", "16", "--seeds", "0"]
    flags += ["--histogram-every", "0", "--no-jit", "--variants", "pre"]
    flags += ["--norm", "batch", "--variable-length", "--batch-size", "4"]
    flags += ["--batchnorm-padding", "counted", "--batchnorm-momentum", "0.9"]
    assert main(["compare", "--output-dir", output_dir, *flags]) == 0
    with open(f"{output_dir}/results.json") as handle:
        result = json.load(handle)
    assert result["config"]["batchnorm_padding"] == "counted"
    assert result["config"]["batchnorm_momentum"] == 0.9
    (row,) = result["table"]
    assert row["train_inference_gap_mean"] is not None


def test_weights_finite_passes_over_integer_state():
    class Counter(keras.layers.Layer):
        def build(self, input_shape):
            self.count = self.add_weight(
                name="count", shape=(), dtype="int32", initializer="zeros",
                trainable=False,
            )  # fmt: skip

        def call(self, inputs):
            return inputs

    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(1)(Counter()(inputs)))
    assert any(not tf.as_dtype(w.dtype).is_floating for w in model.weights)
    assert bool(claim_measures.weights_finite(model))

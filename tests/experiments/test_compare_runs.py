"""One run of the warm-up experiment, `tfnorm.experiments.compare_runs`."""

from __future__ import annotations

import numpy as np
import pytest


def _config(**values):
    from tfnorm.experiments.compare_settings import CompareConfig

    tiny = {"num_layers": 1, "d_model": 8, "num_heads": 2, "dff": 16, "seq_len": 4}
    return CompareConfig.from_dict({**tiny, "jit_compile": False, **values}).resolve()


def test_a_float16_trainer_builds_half_layers_and_scales_the_loss():
    from tfnorm import _keras
    from tfnorm._keras import tf
    from tfnorm.experiments.compare_runs import PositionTrainer

    trainer = PositionTrainer("pre", _config(mixed_precision="float16"), 5)
    assert _keras.global_policy_name() == "float32"
    assert trainer.model.get_layer("logits").compute_dtype == "float16"
    assert trainer.model.get_layer("logits").kernel.dtype == "float32"
    assert _keras.is_loss_scaled(trainer.optimizer)
    fresh = [v.numpy() for v in _keras.optimizer_variables(trainer.optimizer)]
    tokens = np.random.default_rng(0).integers(0, 5, (4, 4)).astype("int32")
    trainer.optimizer.learning_rate = 1e-3
    loss, norm, blocks, applied, scale, finite = trainer.train_step(
        tf.constant(tokens), tf.constant(tokens), tf.ones((4, 4))
    )
    assert np.isfinite(float(loss)) and bool(applied) and bool(finite)
    # The scale the step's loss was multiplied by: the initial one, 2 ** 15.
    assert float(scale) == 2.0**15
    # The per-block norms are of the unscaled gradients, as the global one is.
    assert 0 < float(tf.norm(blocks)) <= float(norm) * (1 + 1e-3)
    trainer.reset(1)
    # A run starts from the fresh state: the loss scale is not zeroed.
    after = [v.numpy() for v in _keras.optimizer_variables(trainer.optimizer)]
    for before, now in zip(fresh, after):
        np.testing.assert_array_equal(before, now)
    assert any(np.any(value > 1) for value in after) == any(
        np.any(value > 1) for value in fresh
    )


def test_a_float16_step_that_overflows_is_skipped_by_the_optimizer():
    from tfnorm._keras import tf
    from tfnorm.experiments.compare_runs import PositionTrainer

    trainer = PositionTrainer("pre", _config(mixed_precision="float16"), 5)
    trainer.optimizer.learning_rate = 1e-3
    # Logits weights of 1e5 are finite in float32 but overflow float16's
    # range (65504) in the forward pass, so the gradients are not finite.
    logits = trainer.model.get_layer("logits")
    logits.kernel.assign(tf.fill(logits.kernel.shape, 1e5))
    before = [w.numpy() for w in trainer.model.weights]
    tokens = tf.constant(np.random.default_rng(0).integers(0, 5, (4, 4)), tf.int32)
    _, norm, _, applied, scale, finite = trainer.train_step(
        tokens, tokens, tf.ones((4, 4))
    )
    assert not bool(applied) and not np.isfinite(float(norm))
    assert float(scale) == 2.0**15 and bool(finite)
    # The optimizer's answer to the skip: the next step's scale is halved.
    _, _, _, _, scale, _ = trainer.train_step(tokens, tokens, tf.ones((4, 4)))
    assert float(scale) == 2.0**14
    for old, weight in zip(before, trainer.model.weights):
        np.testing.assert_array_equal(weight.numpy(), old)


def test_the_trainer_builds_the_controls_it_is_asked_for():
    from tfnorm.callbacks.layers import find_norm_layers
    from tfnorm.experiments import controls
    from tfnorm.experiments.compare_runs import PositionTrainer

    trainer = PositionTrainer("pre", _config(norm="batch"), 5, pad_id=0)
    norms = [layer for _, layer in find_norm_layers(trainer.model)]
    assert any(isinstance(n, controls.MaskedBatchNorm) for n in norms)
    assert "padding_mask" in [layer.name for layer in trainer.model.layers]
    trainer = PositionTrainer("post", _config(statistics="compute"), 5)
    norms = [layer for _, layer in find_norm_layers(trainer.model)]
    assert norms and all(isinstance(n, controls.ComputeDtypeLayerNorm) for n in norms)


def test_the_optimizer_and_decoder_settings_reach_the_run():
    # `tfnorm compare --task lm` takes the LM settings of `tfnorm train`.
    from tfnorm._keras import tf
    from tfnorm.experiments.compare_runs import PositionTrainer

    cfg = _config(
        task="lm", beta1=0.8, beta2=0.99, adam_epsilon=1e-7, preset="gpt2",
        bias=False, init_std=0.02, feed_forward="gelu", norms=["layer"],
    )  # fmt: skip
    trainer = PositionTrainer("pre", cfg, 257)
    config = trainer.optimizer.get_config()
    # Keras 2.9 keeps them as float32.
    assert [config["beta_1"], config["beta_2"]] == pytest.approx([0.8, 0.99])
    assert config["epsilon"] == pytest.approx(1e-7)
    names = [v.name for v in trainer.model.trainable_variables]
    assert not [name for name in names if "bias" in name]
    # gpt2: learned positions, a second embedding table beside the tokens'.
    assert sum("embeddings" in name for name in names) == 2
    embedding = trainer.model.trainable_variables[0]
    assert 0.01 < float(tf.math.reduce_std(embedding)) < 0.03


def test_the_step_says_when_a_weight_is_not_finite():
    from tfnorm._keras import tf
    from tfnorm.experiments.compare_runs import PositionTrainer

    trainer = PositionTrainer("pre", _config(), 5)
    trainer.optimizer.learning_rate = 1e-3
    tokens = tf.constant(np.random.default_rng(0).integers(0, 5, (4, 4)), tf.int32)
    *_, applied, scale, finite = trainer.train_step(tokens, tokens, tf.ones((4, 4)))
    assert bool(applied) and bool(finite) and float(scale) == 1.0
    bias = trainer.model.get_layer("logits").bias
    bias.assign(tf.fill(bias.shape, float("nan")))
    # Float32 Adam applies every step: the NaN stays, and the step says so.
    *_, applied, _, finite = trainer.train_step(tokens, tokens, tf.ones((4, 4)))
    assert bool(applied) and not bool(finite)


def test_the_trainer_builds_the_claims_settings_into_the_model():
    from tfnorm.callbacks.layers import find_norm_layers
    from tfnorm.experiments import controls
    from tfnorm.experiments.compare_runs import PositionTrainer

    config = _config(num_layers=2, epsilon=1e-7, deep_epsilon=1e-5, position_offset=3.0)
    trainer = PositionTrainer("pre", config, 5)
    epsilons = {name: layer.epsilon for name, layer in find_norm_layers(trainer.model)}
    assert len(epsilons) == 5  # two per block and the final norm
    for name, epsilon in epsilons.items():
        deep = name.startswith(("encoder/block_1", "encoder/final"))
        assert epsilon == (1e-5 if deep else 1e-7), name
    layers = [layer.name for layer in trainer.model.layers]
    assert "position_offset" in layers
    config = _config(norm="batch", batchnorm_momentum=0.9, variable_length=True,
                     batchnorm_padding="counted")  # fmt: skip
    trainer = PositionTrainer("pre", config, 5, pad_id=0)
    norms = [n for _, n in find_norm_layers(trainer.model)
             if isinstance(n, controls.MaskedBatchNorm)]  # fmt: skip
    assert norms and all(n.count_padding and n.momentum == 0.9 for n in norms)
    assert all(n.batch_norm.momentum == 0.9 for n in norms)

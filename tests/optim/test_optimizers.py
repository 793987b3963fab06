"""Tests for `tfnorm.training.make_optimizer` and tfnorm's AdamW."""

from __future__ import annotations

import numpy as np
import pytest

import tfnorm
from tfnorm._keras import build_optimizer, keras, tf
from tfnorm.optim import make_optimizer
from tfnorm.optim.optimizers import AdamW, norm_variable_paths, variable_path

LR, WD = 0.1, 0.5  # one zero-gradient step shrinks decayed variables by 5 %


def _model():
    """Dense + Keras LN named "ln_1" + every tfnorm norm under unhelpful names."""
    inputs = keras.Input((6,))
    x = keras.layers.Dense(6, name="dense")(inputs)
    x = keras.layers.LayerNormalization(name="ln_1")(x)
    x = tfnorm.RMSNorm(name="r1")(x)
    x = tfnorm.ScaleNorm(name="s1")(x)
    x = tfnorm.LayerNormalization(name="tln")(x)
    outputs = keras.layers.Dense(2, name="head")(x)
    return keras.Model(inputs, outputs)


def _perturb(model):
    # γ starts at 1 and β at 0, where a missing decay would still be visible
    # for γ but not for β; random values make every variable show it.
    rng = np.random.default_rng(0)
    for variable in model.trainable_variables:
        variable.assign(rng.uniform(0.5, 1.5, variable.shape).astype("float32"))


def _zero_gradient_step(optimizer, model):
    before = {variable_path(v): v.numpy().copy() for v in model.trainable_variables}
    optimizer.apply_gradients(
        [(tf.zeros_like(v), v) for v in model.trainable_variables]
    )
    return {
        variable_path(v): (before[variable_path(v)], v.numpy())
        for v in model.trainable_variables
    }


def _is_norm_or_bias(path):
    return path.endswith("bias") or path.split("/")[-2] in ("ln_1", "r1", "s1", "tln")


@pytest.mark.parametrize("pass_model", [True, False], ids=["with_model", "names_only"])
def test_zero_gradients_decay_kernels_but_not_norm_weights_or_biases(pass_model):
    model = _model()
    _perturb(model)
    optimizer = make_optimizer(
        "adamw", learning_rate=LR, weight_decay=WD, model=model if pass_model else None
    )
    changes = _zero_gradient_step(optimizer, model)
    assert len(changes) == 10
    for path, (before, after) in changes.items():
        if _is_norm_or_bias(path):
            np.testing.assert_array_equal(after, before, err_msg=path)
        else:
            np.testing.assert_allclose(
                after, before * (1 - LR * WD), rtol=1e-6, err_msg=path
            )


def test_ownership_excludes_a_norm_whose_weights_have_unusual_names():
    class OddNorm(tfnorm.LayerNormalization):
        def _add_param(self, name, *args, **kwargs):
            return super()._add_param("w_" + name, *args, **kwargs)

    inputs = keras.Input((4,))
    outputs = OddNorm(name="odd")(
        keras.layers.Dense(4, use_bias=False, name="d")(inputs)
    )
    model = keras.Model(inputs, outputs)
    _perturb(model)
    assert sorted(p.split("/")[-1] for p in norm_variable_paths(model)) == [
        "w_beta",
        "w_gamma",
    ]
    with_model = _zero_gradient_step(
        make_optimizer(learning_rate=LR, weight_decay=WD, model=model), model
    )
    for path, (before, after) in with_model.items():
        if "/odd/" in "/" + path or path.startswith("odd/"):
            np.testing.assert_array_equal(after, before, err_msg=path)
        else:
            assert not np.allclose(after, before), path


def test_names_only_rule_does_not_spare_kernels_inside_a_block_named_norm():
    # The patterns look at "owning_layer/weight_name" only, so a kernel whose
    # grand-parent is called "pre_norm_block" still decays.
    optimizer = AdamW(learning_rate=LR, weight_decay=WD)

    class Named:
        def __init__(self, name):
            self.name = name

    assert optimizer.decays_variable(Named("pre_norm_block/attention/query/kernel:0"))
    assert not optimizer.decays_variable(Named("pre_norm_block/attention_norm/gamma:0"))
    assert not optimizer.decays_variable(Named("block/ffn/bias/replica_1:0"))
    assert not optimizer.decays_variable(Named("block/rms/scale:0"))


def test_custom_patterns_add_to_the_norm_rules():
    optimizer = make_optimizer(
        learning_rate=LR, weight_decay=WD, exclude_from_weight_decay=("embedding",)
    )

    class Named:
        def __init__(self, name):
            self.name = name

    assert not optimizer.decays_variable(Named("token_embedding/embeddings:0"))
    assert not optimizer.decays_variable(Named("ln/gamma:0"))
    assert optimizer.decays_variable(Named("dense/bias:0"))


def test_decay_follows_a_schedule_learning_rate():
    model = _model()
    _perturb(model)
    schedule = tfnorm.training.WarmupSchedule(LR, warmup_steps=4, total_steps=10)
    optimizer = make_optimizer(learning_rate=schedule, weight_decay=WD, model=model)
    changes = _zero_gradient_step(optimizer, model)
    before, after = changes[[p for p in changes if p.endswith("dense/kernel")][0]]
    # Step 0 of a 4-step warm-up uses a quarter of the peak rate.
    np.testing.assert_allclose(after, before * (1 - LR / 4 * WD), rtol=1e-6)


def test_clipnorm_clips_the_global_gradient_norm():
    variable_a = tf.Variable([0.0, 0.0])
    variable_b = tf.Variable([0.0])
    optimizer = make_optimizer("sgd", learning_rate=1.0, clipnorm=1.0)
    # The global norm is 5, so both gradients shrink by 1/5; per-variable
    # clipping would give a step of [-1, 0] and [-1] instead.
    optimizer.apply_gradients(
        [(tf.constant([3.0, 0.0]), variable_a), (tf.constant([4.0]), variable_b)]
    )
    np.testing.assert_allclose(variable_a.numpy(), [-0.6, 0.0], rtol=1e-6)
    np.testing.assert_allclose(variable_b.numpy(), [-0.8], rtol=1e-6)


@pytest.mark.parametrize("name", ["adam", "sgd"])
def test_adam_and_sgd_do_not_decay(name):
    variable = tf.Variable([1.0, 2.0], name="kernel")
    optimizer = make_optimizer(name, learning_rate=LR, weight_decay=WD)
    optimizer.apply_gradients([(tf.zeros_like(variable), variable)])
    np.testing.assert_array_equal(variable.numpy(), [1.0, 2.0])


def test_adamw_trains_a_model_with_fit():
    model = _model()
    model.compile(optimizer=make_optimizer(learning_rate=1e-2, model=model), loss="mse")
    x = np.random.default_rng(1).normal(size=(32, 6)).astype("float32")
    y = x[:, :2] * 2.0
    history = model.fit(x, y, epochs=15, batch_size=8, verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]


def test_adamw_config_round_trip():
    optimizer = make_optimizer(
        learning_rate=2e-3, weight_decay=0.03, exclude_from_weight_decay=("emb",)
    )
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(restored, AdamW)
    config = restored.get_config()
    assert config["exclude_from_weight_decay"] == ["emb"]
    assert config["weight_decay"] == pytest.approx(0.03)
    assert config["learning_rate"] == pytest.approx(2e-3)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"name": "lamb"}, "name='lamb'"),
        ({"learning_rate": 0}, "learning_rate=0"),
        ({"learning_rate": float("inf")}, "learning_rate=inf"),
        ({"weight_decay": -0.1}, "weight_decay=-0.1"),
        ({"clipnorm": 0.0}, "clipnorm=0.0"),
        ({"clipnorm": float("nan")}, "clipnorm=nan"),
        ({"exclude_from_weight_decay": ("[",)}, r"Received: '\['"),
    ],
)
def test_invalid_arguments_name_the_argument_and_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_optimizer(**kwargs)


def test_adamw_under_mirrored_strategy_skips_norms():
    from tests.test_distribute import two_cpu_mirrored_strategy

    two_device_strategy = two_cpu_mirrored_strategy()
    with two_device_strategy.scope():
        model = _model()
        _perturb(model)
        optimizer = make_optimizer(learning_rate=LR, weight_decay=WD, clipnorm=1.0)
        build_optimizer(optimizer, model.trainable_variables)

    @tf.function
    def step():
        def replica_fn():
            optimizer.apply_gradients(
                [(tf.zeros_like(v), v) for v in model.trainable_variables]
            )

        two_device_strategy.run(replica_fn)

    before = {variable_path(v): v.numpy().copy() for v in model.trainable_variables}
    step()
    for variable in model.trainable_variables:
        path = variable_path(variable)
        expected = before[path] * (1.0 if _is_norm_or_bias(path) else 1 - LR * WD)
        np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-6, err_msg=path)


def test_clipnorm_under_mirrored_strategy_clips_the_summed_gradient():
    from tests.test_distribute import two_cpu_mirrored_strategy

    strategy = two_cpu_mirrored_strategy()
    with strategy.scope():
        variable = tf.Variable([0.0, 0.0], name="kernel")
        optimizer = make_optimizer("sgd", learning_rate=1.0, clipnorm=1.0)
        build_optimizer(optimizer, [variable])

    @tf.function
    def step():
        def replica_fn():
            # Replica 0 sees [3, 0], replica 1 [0, 4]: the summed gradient
            # [3, 4] has norm 5. Clipping each replica's share separately
            # (Keras 3's own order) would give [1, 0] + [0, 1] instead.
            replica = tf.cast(
                tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32
            )
            grad = tf.stack([3.0 * (1.0 - replica), 4.0 * replica])
            optimizer.apply_gradients([(grad, variable)])

        strategy.run(replica_fn)

    step()
    np.testing.assert_allclose(variable.numpy(), [-0.6, -0.8], rtol=1e-5)


def _embedding_model():
    inputs = keras.Input((3,), dtype="int32")
    x = keras.layers.Embedding(5, 4, name="token_embedding")(inputs)
    x = keras.layers.LayerNormalization(name="final_norm")(x)
    return keras.Model(inputs, keras.layers.Dense(2, name="head")(x))


@pytest.mark.parametrize(
    "target, decayed",
    [
        ("matrices", {"token_embedding/embeddings", "head/kernel"}),
        ("kernels", {"head/kernel"}),
        ("matrices_and_biases", {"token_embedding/embeddings", "head/kernel", "head/bias"}),
        ("all", {"token_embedding/embeddings", "head/kernel", "head/bias", "final_norm/gamma", "final_norm/beta"}),
    ],
)  # fmt: skip
def test_decay_target_names_the_variables_the_decay_shrinks(target, decayed):
    from tfnorm.optim.optimizers import decay_target

    model = _embedding_model()
    _perturb(model)
    exclude, decay_norms = decay_target(target)
    optimizer = make_optimizer(
        "adamw", LR, WD, exclude, decay_norms=decay_norms, model=model
    )
    changes = _zero_gradient_step(optimizer, model)
    shrunk = {path for path, (b, a) in changes.items() if not np.allclose(a, b)}
    assert {"/".join(path.split("/")[-2:]) for path in shrunk} == decayed


def test_describe_decay_counts_the_decayed_variables_and_names_the_rest():
    from tfnorm.optim.optimizers import describe_decay

    model = _embedding_model()
    optimizer = make_optimizer("adamw", LR, WD, model=model)
    line = describe_decay(optimizer, model.trainable_variables)
    assert line == "weight decay 0.5 on 2 of 5 variables (not on: beta, bias, gamma)"
    assert describe_decay(make_optimizer("adam", LR), []) == "no weight decay"


def test_describe_decay_reads_a_decay_made_under_a_strategy():
    # Keras 2.9's AdamW keeps the decay as a variable, mirrored under a
    # strategy: the multi-worker run's first line failed on float() of it.
    from tfnorm.optim.optimizers import describe_decay

    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        model = _embedding_model()
        optimizer = make_optimizer("adamw", LR, WD, model=model)
        line = describe_decay(optimizer, model.trainable_variables)
    assert line.startswith("weight decay 0.5 on 2 of 5 variables")


def test_decay_norms_survives_get_config():
    optimizer = make_optimizer("adamw", LR, WD, (), decay_norms=True)
    assert AdamW.from_config(optimizer.get_config()).decay_norms is True

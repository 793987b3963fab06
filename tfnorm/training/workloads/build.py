"""Everything a run trains and checkpoints, built under its strategy.

Built before anything is written to disk, so that a batch size the replicas
cannot share, or a model the settings cannot build, fails as a setting error
with nothing left behind.
"""

from __future__ import annotations

import dataclasses

from tfnorm import _keras
from tfnorm._keras import keras, tf
from tfnorm.settings.config_error import ConfigError


@dataclasses.dataclass
class ModelSetup:
    """The built pieces of one run (see `build_classifier_setup`).

    `schedule` is None when the optimizer is the user's own (a compiled
    `model_fn` model); `data_iterator` is the checkpointed `tf.data`
    iterator of a run fed by a dataset, else None.
    """

    strategy: object
    policy: str
    model: object
    schedule: object
    optimizer: object
    step: object
    examples_seen: object
    checkpoint: object
    data_iterator: object = None

    @property
    def replicas(self):
        return self.strategy.num_replicas_in_sync

    def learning_rate(self, step):
        """The learning rate of step `step` (counting from 1)."""
        if self.schedule is not None:
            return float(self.schedule(step - 1))
        rate = getattr(self.optimizer, "learning_rate", None)
        if callable(rate):
            rate = rate(max(step - 1, 0))
        try:
            return float(rate)
        except (TypeError, ValueError):
            return None


def build_classifier_setup(config, train_set, total_steps):
    """The strategy, classifier, schedule, optimizer, counters and checkpoint.

    The checkpoint holds the model, the optimizer (slots created here, so a
    restore finds every variable), the step count, the data position
    (examples consumed from the seeded order) and the dropout generators'
    state; nothing else is needed to continue a run exactly.

    Raises:
        ConfigError: `batch_size` does not split evenly over the replicas.
    """
    from tfnorm.models import build_classifier

    strategy, policy = prepare_runtime(config)
    with strategy.scope(), _keras.checkpointable_random_state():
        model = build_classifier(
            train_set.vocab_size,
            config.max_len,
            train_set.num_classes,
            num_layers=config.num_layers,
            d_model=config.d_model,
            num_heads=config.num_heads,
            dff=config.dff,
            norm=config.norm,
            norm_position=config.norm_position,
            pooling=config.pooling,
            dropout_rate=config.dropout_rate,
            epsilon=config.epsilon,
        )
        schedule = run_schedule(config, total_steps)
        optimizer = run_optimizer(config, model, schedule)
        optimizer = wrap_and_build(optimizer, model)
        return assemble(strategy, policy, model, schedule, optimizer)


def prepare_runtime(config):
    """The run's strategy and dtype policy, with the global seed set.

    Raises:
        ConfigError: `batch_size` does not split evenly over the replicas.
    """
    from tfnorm.distribute import DeviceError, get_strategy
    from tfnorm.optim.precision import set_mixed_precision

    try:
        strategy = get_strategy(config.strategy, devices=config.devices)
    except DeviceError as error:
        raise ConfigError("devices", str(error)) from None
    replicas = strategy.num_replicas_in_sync
    if getattr(config, "jit_compile", False) and replicas > 1:
        raise ConfigError(
            "jit_compile",
            f"jit_compile compiles one replica's step; the {config.strategy!r} "
            f"strategy runs {replicas}, whose gradients are summed outside "
            "XLA. Leave it out, or train on one device. "
            f"Received: jit_compile=True, strategy={config.strategy!r}",
        )
    if config.batch_size % replicas:
        raise ConfigError(
            "batch_size",
            f"The global batch_size must divide evenly over the {replicas} "
            f"replicas of the {config.strategy!r} strategy. "
            f"Received: batch_size={config.batch_size}",
        )
    policy = set_mixed_precision(config.mixed_precision)
    keras.utils.set_random_seed(config.seed)
    return strategy, policy


def assemble(strategy, policy, model, schedule, optimizer, data_iterator=None):
    """The `ModelSetup` of a built model and optimizer, with its checkpoint.

    Call it under `strategy.scope()` and `checkpointable_random_state()`,
    after the model's variables and the optimizer's slots exist.
    """
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    examples_seen = tf.Variable(
        0, dtype=tf.int64, trainable=False, name="examples_seen"
    )
    state = {
        "model": model,
        "optimizer": _keras.checkpointable_optimizer(optimizer),
        "step": step,
        "examples_seen": examples_seen,
        "random_state": _keras.random_state_checkpoint(model),
    }
    if data_iterator is not None:
        state["data_iterator"] = data_iterator
    checkpoint = tf.train.Checkpoint(**state)
    return ModelSetup(
        strategy,
        policy,
        model,
        schedule,
        optimizer,
        step,
        examples_seen,
        checkpoint,
        data_iterator,
    )


def run_schedule(config, total_steps):
    """The learning-rate schedule of the run's settings: the warm-up, then
    the decay to `min_learning_rate` at `total_steps`."""
    from tfnorm.optim.schedules import WarmupSchedule

    return WarmupSchedule(
        config.learning_rate,
        config.warmup_steps,
        total_steps,
        decay=config.decay,
        final_lr=config.min_learning_rate,
    )


def run_optimizer(config, model, schedule):
    """The optimizer the run's settings describe (AdamW decaying the
    variables `weight_decay_on` names; by default not norms or biases).

    Clipping (`clipnorm`) is the optimizer's own: it clips the gradient
    summed over the replicas on every runtime.
    """
    from tfnorm.optim.optimizers import decay_target, make_optimizer

    exclude, decay_norms = decay_target(config.weight_decay_on)
    extra = {}
    if config.optimizer != "sgd":
        extra = dict(
            beta_1=config.beta1, beta_2=config.beta2, epsilon=config.adam_epsilon
        )
    return make_optimizer(
        config.optimizer,
        learning_rate=schedule,
        weight_decay=config.weight_decay,
        exclude_from_weight_decay=exclude,
        decay_norms=decay_norms,
        clipnorm=config.clipnorm,
        model=model,
        **extra,
    )


def wrap_and_build(optimizer, model):
    """`optimizer` loss-scaled if the policy needs it, its slots built."""
    from tfnorm.optim.precision import wrap_for_mixed_precision

    optimizer = wrap_for_mixed_precision(optimizer)
    _keras.build_optimizer(optimizer, model.trainable_variables)
    return optimizer


def describe_run_decay(setup, config):
    """The progress line saying which variables the weight decay shrinks,
    or None when the optimizer is not the run's own AdamW (a compiled
    `model_fn` model keeps its own)."""
    from tfnorm.optim.optimizers import describe_decay

    optimizer = getattr(setup.optimizer, "inner_optimizer", setup.optimizer)
    if not hasattr(optimizer, "decays_variable"):
        return None
    described = describe_decay(optimizer, setup.model.trainable_variables)
    return f"{described}; weight_decay_on {config.weight_decay_on}"

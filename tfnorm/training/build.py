"""Everything a classifier run trains and checkpoints, built under its strategy.

Built before anything is written to disk, so that a batch size the replicas
cannot share, or a model the settings cannot build, fails as a setting error
with nothing left behind.
"""

from __future__ import annotations

import dataclasses

from tfnorm import _keras
from tfnorm._keras import keras, tf
from tfnorm.training.config import ConfigError


@dataclasses.dataclass
class Training:
    """The built pieces of one run (see `build_training`)."""

    strategy: object
    policy: str
    model: object
    schedule: object
    optimizer: object
    step: object
    examples_seen: object
    checkpoint: object

    @property
    def replicas(self):
        return self.strategy.num_replicas_in_sync


def build_training(config, train_set, total_steps):
    """The strategy, model, schedule, optimizer, counters and checkpoint.

    The checkpoint holds the model, the optimizer (slots created here, so a
    restore finds every variable), the step count and the data position
    (examples consumed from the seeded order); nothing else is needed to
    continue a run exactly.

    Raises:
        ConfigError: `batch_size` does not split evenly over the replicas.
    """
    from tfnorm.distribute import get_strategy
    from tfnorm.models import build_classifier
    from tfnorm.training.precision import set_mixed_precision
    from tfnorm.training.schedules import WarmupSchedule

    strategy = get_strategy(config.strategy, devices=config.devices)
    replicas = strategy.num_replicas_in_sync
    if config.batch_size % replicas:
        raise ConfigError(
            "batch_size",
            f"The global batch_size must divide evenly over the {replicas} "
            f"replicas of the {config.strategy!r} strategy. "
            f"Received: batch_size={config.batch_size}",
        )
    policy = set_mixed_precision(config.mixed_precision)
    keras.utils.set_random_seed(config.seed)
    with strategy.scope():
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
        schedule = WarmupSchedule(
            config.learning_rate, config.warmup_steps, total_steps, decay=config.decay
        )
        optimizer = _optimizer(config, model, schedule)
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        examples_seen = tf.Variable(
            0, dtype=tf.int64, trainable=False, name="examples_seen"
        )
    checkpoint = tf.train.Checkpoint(
        model=model,
        optimizer=_keras.checkpointable_optimizer(optimizer),
        step=step,
        examples_seen=examples_seen,
    )
    return Training(
        strategy, policy, model, schedule, optimizer, step, examples_seen, checkpoint
    )


def _optimizer(config, model, schedule):
    """The configured optimizer with its slots built, loss-scaled if needed.

    Clipping (`clipnorm`) is the optimizer's own: it clips the gradient
    summed over the replicas on every runtime.
    """
    from tfnorm.training.optimizers import make_optimizer
    from tfnorm.training.precision import wrap_for_mixed_precision

    optimizer = make_optimizer(
        config.optimizer,
        learning_rate=schedule,
        weight_decay=config.weight_decay,
        clipnorm=config.clipnorm,
        model=model,
    )
    optimizer = wrap_for_mixed_precision(optimizer)
    _keras.build_optimizer(optimizer, model.trainable_variables)
    return optimizer

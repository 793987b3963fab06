"""One run of the warm-up experiment: the reverse task, its model, one trained variant.

`tfnorm.experiments.warmup.run_comparison` trains every variant for every
seed with `train_run`, reusing one `PositionTrainer` (one model, one compiled
step) per norm position.

The task ("reverse") is token-level: the target sequence is the input
reversed, which needs attention across the whole sequence. Fresh random
batches are drawn at every step; token accuracy is measured on a fixed
evaluation set (chance = 1 / vocab_size).
"""

from __future__ import annotations

import os
import time

import numpy as np

from tfnorm import _keras
from tfnorm._keras import keras, tf
from tfnorm.experiments.gradients import layer_gradient_norms, token_cross_entropy
from tfnorm.experiments.warmup_report import EARLY_STEPS, TARGET_ACCURACY
from tfnorm.training.loop import Action, run_loop
from tfnorm.training.optimizers import make_optimizer
from tfnorm.training.schedules import WarmupSchedule


def reverse_task(rng, count, seq_len, vocab_size):
    """`count` random token sequences and their reversals, as int32 arrays."""
    tokens = rng.integers(0, vocab_size, size=(count, seq_len)).astype("int32")
    return tokens, tokens[:, ::-1].copy()


def build_model(num_layers, d_model, num_heads, dff, vocab_size, seq_len, **options):
    """Token + position embeddings, a tfnorm encoder, and per-token logits.

    Both embeddings are initialised N(0, 1): with small position embeddings
    neither variant learns the reverse task in a few hundred steps.

    Returns:
        `(model, encoder)`.
    """
    from tfnorm.models import build_encoder
    from tfnorm.models.text_layers import TokenAndPositionEmbedding

    tokens = keras.Input((seq_len,), dtype="int32", name="tokens")
    embedded = TokenAndPositionEmbedding(
        vocab_size,
        seq_len,
        d_model,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=1.0),
        name="embedding",
    )(tokens)
    encoder = build_encoder(
        num_layers,
        d_model,
        num_heads,
        dff,
        dropout_rate=0.0,
        with_padding_mask=False,
        seq_len=seq_len,
        **options,
    )
    logits = keras.layers.Dense(vocab_size, name="logits")(encoder(embedded))
    return keras.Model(tokens, logits, name="reverse_model"), encoder


class PositionTrainer:
    """One compiled model per norm position, re-initialised for every run.

    XLA compilation of a training step costs far more than the few hundred
    steps it runs (minutes on a loaded 2-core machine), so every run of one
    norm position reuses one model and one compiled step: a run copies fresh
    seeded weights in, zeroes the optimizer state, and feeds the learning rate
    of its schedule at every step.
    """

    def __init__(self, position, cfg):
        keras.backend.clear_session()
        self.position = position
        self.cfg = cfg
        self.model, self.encoder = self._build()
        # The calibrated setting: Adam with beta_2 0.98, no clipping (clipping
        # hides the Post-LN instability) and no weight decay.
        self.optimizer = make_optimizer(
            "adam", cfg["learning_rate"], beta_2=0.98, epsilon=1e-9
        )
        _keras.build_optimizer(self.optimizer, self.model.trainable_variables)
        self.train_step = tf.function(self._train_step, jit_compile=cfg["jit_compile"])
        self.accuracy = tf.function(self._accuracy)

    def _build(self):
        cfg = self.cfg
        return build_model(
            cfg["num_layers"],
            cfg["d_model"],
            cfg["num_heads"],
            cfg["dff"],
            cfg["vocab_size"],
            cfg["seq_len"],
            norm=cfg["norm"],
            norm_position=self.position,
            epsilon=cfg["epsilon"],
        )

    def reset(self, seed):
        keras.utils.set_random_seed(seed)
        fresh, _ = self._build()
        self.model.set_weights(fresh.get_weights())
        variables = self.optimizer.variables
        for variable in variables() if callable(variables) else variables:
            variable.assign(tf.zeros_like(variable))

    def _train_step(self, tokens, targets):
        model = self.model
        with tf.GradientTape() as tape:
            loss = token_cross_entropy(targets, model(tokens, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss, tf.linalg.global_norm(grads)

    def _accuracy(self, tokens, targets):
        logits = self.model(tokens, training=False)
        predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return tf.reduce_mean(tf.cast(tf.equal(predicted, targets), tf.float32))


class _Record(Action):
    """Keeps every step's loss and gradient norm, and writes them with the rate."""

    def __init__(self):
        self.losses, self.gradient_norms = [], []

    def on_step_end(self, step, logs):
        self.losses.append(logs["loss"])
        self.gradient_norms.append(logs["gradient_norm"])
        # TensorBoard steps count from 0 here, as in the published runs.
        tf.summary.scalar("loss", logs["loss"], step=step - 1)
        tf.summary.scalar("gradient_norm", logs["gradient_norm"], step=step - 1)
        tf.summary.scalar("learning_rate", logs["learning_rate"], step=step - 1)


class _Evaluate(Action):
    """Token accuracy on the held-out batch every `every` steps and at the end."""

    def __init__(self, accuracy, eval_data, every, total_steps):
        self.accuracy, self.eval_data = accuracy, eval_data
        self.every, self.total_steps = every, total_steps
        self.evals = []

    def on_step_end(self, step, logs):
        if step % self.every == 0 or step == self.total_steps:
            value = float(self.accuracy(*self.eval_data))
            self.evals.append((step, value))
            tf.summary.scalar("eval_token_accuracy", value, step=step - 1)


def train_run(trainer, name, warmup_steps, seed, eval_data, logdir, log):
    """Trains `trainer`'s model from fresh weights of `seed`; returns the run's record.

    The record holds the variant, every step's loss and gradient norm, the
    evaluations, the steps to `TARGET_ACCURACY` and the per-layer gradient
    norms at initialisation; one progress line goes to `log`.
    """
    steps = trainer.cfg["steps"]
    trainer.reset(seed)
    eval_tokens, eval_targets = eval_data
    init_norms = layer_gradient_norms(
        trainer.model, trainer.encoder, eval_tokens[:256], eval_targets[:256]
    )
    step_fn = _step_function(trainer, warmup_steps, seed)
    record = _Record()
    evaluate = _Evaluate(trainer.accuracy, eval_data, trainer.cfg["eval_every"], steps)
    writer = tf.summary.create_file_writer(os.path.join(logdir, _slug(name, seed)))
    started = time.time()
    with writer.as_default():
        run_loop(step_fn, 0, steps, [record, evaluate])
        for layer, norm in enumerate(init_norms):
            tf.summary.scalar("init_ffn_gradient_norm", norm, step=layer)
    writer.close()
    seconds = time.time() - started
    run = {
        "variant": name,
        "norm_position": trainer.position,
        "warmup_steps": warmup_steps,
        "seed": seed,
        **_curves(record, evaluate.evals),
        "init_layer_gradient_norms": init_norms,
        "seconds": seconds,
    }
    log(
        f"  {name:<24} seed {seed}: final accuracy {run['final_accuracy']:.3f}, "
        f"steps to {TARGET_ACCURACY:.0%}: {run['steps_to_target'] or '-'}, "
        f"{1000 * seconds / steps:.0f} ms/step"
    )
    return run


def _step_function(trainer, warmup_steps, seed):
    """One training step on a fresh batch at the schedule's learning rate."""
    cfg = trainer.cfg
    schedule = WarmupSchedule(cfg["learning_rate"], warmup_steps, decay="constant")
    rates = schedule(np.arange(cfg["steps"])).numpy()
    rng = np.random.default_rng(10_000 + seed)

    def step_fn(step):
        tokens, targets = reverse_task(
            rng, cfg["batch_size"], cfg["seq_len"], cfg["vocab_size"]
        )
        rate = float(rates[step - 1])
        trainer.optimizer.learning_rate = rate
        loss, grad_norm = trainer.train_step(tf.constant(tokens), tf.constant(targets))
        return {
            "loss": float(loss),
            "gradient_norm": float(grad_norm),
            "learning_rate": rate,
        }

    return step_fn


def _curves(record, evals):
    """A run's recorded curves and what the table reads from them."""
    reached = next((s for s, acc in evals if acc >= TARGET_ACCURACY), None)
    return {
        "losses": record.losses,
        "gradient_norms": record.gradient_norms,
        "eval_steps": [s for s, _ in evals],
        "eval_accuracy": [a for _, a in evals],
        "final_accuracy": evals[-1][1],
        "steps_to_target": reached,
        "max_gradient_norm_early": max(record.gradient_norms[:EARLY_STEPS]),
    }


def _slug(name, seed):
    return (
        name.replace("-LN, ", "_").replace("warm-up ", "warmup").replace(" ", "_")
        + f"_seed{seed}"
    ).replace("-", "")

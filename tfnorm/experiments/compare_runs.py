"""One run of the warm-up experiment: its model and one trained variant.

`tfnorm.experiments.compare_experiment.run_comparison` trains every variant
for every seed with `train_run`, reusing one `PositionTrainer` (one model,
one compiled step) per norm position, on a task of `tfnorm.experiments.tasks`
(batches `(inputs, targets, weights)`: weighted means over tokens).
"""

from __future__ import annotations

import os
import time

import numpy as np

from tfnorm import _keras
from tfnorm._keras import keras, tf
from tfnorm.experiments.batch_gradients import (
    GradientVariance,
    gradient_variance_action,
)
from tfnorm.experiments.claim_measures import measurement_actions, weights_finite
from tfnorm.experiments.controls import (
    compute_precision,
    embed_tokens,
    layered_epsilon,
    norm_spec,
    offset_inputs,
    scale_norm_gammas,
)
from tfnorm.experiments.figures import EARLY_STEPS
from tfnorm.experiments.gradients import layer_gradient_norms
from tfnorm.experiments.grouped_clipping import gradient_clipper
from tfnorm.experiments.layer_gradients import (
    block_variable_groups,
    gradient_spread,
    per_block_norms,
    stack_blocks,
)
from tfnorm.experiments.run_actions import Evaluate, Histograms, Record
from tfnorm.experiments.tasks.lm import build_decoder_model, norm_epsilon
from tfnorm.optim.optimizers import make_optimizer
from tfnorm.optim.precision import wrap_for_mixed_precision
from tfnorm.optim.schedules import WarmupSchedule
from tfnorm.training.loop.driver import run_loop


def learning_rates(peak, warmup_steps, steps):
    """The rate at each of `steps` steps: linear warm-up to `peak`, then `peak` held."""
    schedule = WarmupSchedule(peak, warmup_steps, decay="constant")
    return schedule(np.arange(steps)).numpy().astype("float64")


def build_model(
    num_layers,
    d_model,
    num_heads,
    dff,
    vocab_size,
    seq_len,
    input_offset=0.0,
    pad_id=None,
    embedding_std=1.0,
    position_offset=None,
    **options,
):
    """Token + position embeddings, a tfnorm encoder, and per-token logits.

    Both embeddings are initialised N(0, `embedding_std`), 1 by default:
    with small position embeddings neither variant learns the reverse task
    in a few hundred steps. A `position_offset` replaces the position
    embedding (`controls.embed_tokens`). A non-zero `input_offset` is added
    to every feature of the embeddings. With a `pad_id`, the encoder masks
    the positions holding it.

    Returns:
        `(model, encoder)`.
    """
    from tfnorm.models import build_encoder
    from tfnorm.models.encoder.text_layers import PaddingMask

    tokens = keras.Input((seq_len,), dtype="int32", name="tokens")
    embedded = embed_tokens(
        tokens, vocab_size, seq_len, d_model, embedding_std, position_offset
    )
    if input_offset:
        embedded = offset_inputs(embedded, input_offset)
    encoder = build_encoder(
        num_layers,
        d_model,
        num_heads,
        dff,
        dropout_rate=0.0,
        with_padding_mask=pad_id is not None,
        seq_len=seq_len,
        **options,
    )
    if pad_id is not None:
        embedded = [embedded, PaddingMask(pad_id, name="padding_mask")(tokens)]
    logits = keras.layers.Dense(vocab_size, name="logits")(encoder(embedded))
    return keras.Model(tokens, logits, name="token_model"), encoder


def encoder_options(cfg, pad_id):
    """`build_model`'s options of the encoder tasks from `cfg`."""
    options = {
        "input_offset": cfg.input_offset,
        "embedding_std": 1.0 if cfg.embedding_std is None else cfg.embedding_std,
        "position_offset": cfg.position_offset,
    }
    if pad_id is not None:
        options["pad_id"] = pad_id
    return options


def weighted_cross_entropy(targets, logits, weights):
    """Sparse cross-entropy averaged over the tokens weighted 1, in float32."""
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=targets, logits=tf.cast(logits, tf.float32)
    )
    # At least 1: a batch with no weighted token gives 0, not NaN.
    return tf.reduce_sum(losses * weights) / tf.maximum(tf.reduce_sum(weights), 1.0)


class PositionTrainer:
    """One compiled model per norm position, re-initialised for every run.

    XLA compilation of a training step costs far more than the few hundred
    steps it runs (minutes on a loaded 2-core machine), so every run of one
    norm position reuses one model and one compiled step: a run copies fresh
    seeded weights in, restores the optimizer's fresh state, and feeds the learning rate
    of its schedule at every step. Under `cfg.mixed_precision` "float16" the
    model is built with the `mixed_float16` policy and the optimizer scales
    the loss dynamically.
    """

    def __init__(
        self, position, cfg, vocab_size, num_layers=None, norm=None, pad_id=None
    ):
        keras.backend.clear_session()
        # The first build's weights are replaced by every run's `reset`, but
        # under op determinism (which the experiment turns on for the
        # process) TensorFlow 2.9 refuses an unseeded random op, and
        # `clear_session` forgets the seed an earlier run set.
        keras.utils.set_random_seed(cfg.seeds[0])
        self.position = position
        self.cfg = cfg
        self.vocab_size, self.pad_id = vocab_size, pad_id
        self.num_layers = num_layers or cfg.num_layers
        self.norm = norm or cfg.norm
        self.epsilon = cfg.epsilon if self.norm == cfg.norm else norm_epsilon(cfg, norm)
        self.model, self.encoder = self._build()
        self.block_groups = block_variable_groups(
            self.model, stack_blocks(self.encoder)
        )
        # Default: Adam (beta_2 0.98), no decay, no clipping (it hides Post-LN's failure).
        adam = {"beta_1": cfg.beta1, "beta_2": cfg.beta2, "epsilon": cfg.adam_epsilon}
        self.optimizer = wrap_for_mixed_precision(
            make_optimizer("adam", cfg.learning_rate, **adam), cfg.mixed_precision
        )
        self.clip = gradient_clipper(
            self.model, self.optimizer, cfg.clipnorm, cfg.clip_groups
        )
        _keras.build_optimizer(self.optimizer, self.model.trainable_variables)
        # A run starts from this state: zero moments, the initial loss scale.
        self.fresh_optimizer_state = [
            v.numpy() for v in _keras.optimizer_variables(self.optimizer)
        ]
        self.train_step = tf.function(self._train_step, jit_compile=cfg.jit_compile)
        self.evaluate = tf.function(self._evaluate)

    def _build(self):
        cfg = self.cfg
        build, options = build_model, encoder_options(cfg, self.pad_id)
        if cfg.task == "lm":
            build, options = (
                build_decoder_model,
                {
                    "preset": cfg.preset,
                    "feed_forward": cfg.feed_forward,
                    "use_bias": cfg.bias,
                    "init_std": cfg.init_std,
                },
            )
            if cfg.embedding_std is not None:
                options["embeddings_initializer"] = keras.initializers.RandomNormal(
                    stddev=cfg.embedding_std
                )
        with compute_precision(cfg.mixed_precision):
            norm = norm_spec(
                self.norm, cfg.statistics, cfg.batchnorm_momentum, cfg.batchnorm_padding
            )
            model, encoder = build(
                self.num_layers,
                cfg.d_model,
                cfg.num_heads,
                cfg.dff,
                self.vocab_size,
                cfg.seq_len,
                norm=norm,
                norm_position=self.position,
                epsilon=layered_epsilon(
                    self.epsilon, cfg.deep_epsilon, self.num_layers
                ),
                **options,
            )
        if cfg.gamma_init != 1.0:
            scale_norm_gammas(model, cfg.gamma_init)
        return model, encoder

    def reset(self, seed):
        keras.utils.set_random_seed(seed)
        fresh, _ = self._build()
        self.model.set_weights(fresh.get_weights())
        variables = _keras.optimizer_variables(self.optimizer)
        for variable, value in zip(variables, self.fresh_optimizer_state):
            variable.assign(value)

    def _train_step(self, tokens, targets, weights):
        model = self.model
        with tf.GradientTape() as tape:
            logits = model(tokens, training=True)
            loss = weighted_cross_entropy(targets, logits, weights)
            scaled = _keras.scale_loss(self.optimizer, loss)
        # The scale this step's loss was multiplied by (1 without scaling).
        scale = _keras.loss_scale_value(self.optimizer)
        grads = tape.gradient(scaled, model.trainable_variables)
        grads = self.clip(_keras.unscale_gradients(self.optimizer, grads))
        # Applied or skipped is the optimizer's decision; the norms are of
        # the gradients it applied (or refused), without the loss scale.
        applied, norm, unscaled = _keras.apply_gradients_and_report(
            self.optimizer, grads, model.trainable_variables
        )
        blocks = per_block_norms(unscaled, self.block_groups)
        return loss, norm, blocks, applied, scale, weights_finite(model)

    def _evaluate(self, tokens, targets, weights):
        """(weighted token accuracy, weighted cross-entropy) on one batch."""
        logits = self.model(tokens, training=False)
        predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
        hits = tf.cast(tf.equal(predicted, targets), tf.float32)
        accuracy = tf.reduce_sum(hits * weights) / tf.maximum(
            tf.reduce_sum(weights), 1.0
        )
        return accuracy, weighted_cross_entropy(targets, logits, weights)


def train_run(trainer, variant, seed, task, logdir, log):
    """Trains `trainer`'s model from fresh weights of `seed`; returns the run's record.

    `variant` is a dict with `name`, `warmup_steps` and `learning_rate`
    (the peak). The record holds the variant, its rates, every step's loss
    and gradient norm, its median step time, the evaluations, the steps to
    the task's target (accuracy, or a held-out loss threshold), the
    per-layer gradient norms at initialisation and the task's final
    measures (`task.final_measures`); one progress line goes to `log`.
    """
    cfg = trainer.cfg
    steps = cfg.steps
    trainer.reset(seed)
    eval_inputs, eval_targets, eval_weights = task.eval_data
    init_norms = layer_gradient_norms(
        trainer.model,
        trainer.encoder,
        eval_inputs[:256],
        eval_targets[:256],
        eval_weights[:256],
    )
    rates = learning_rates(variant["learning_rate"], variant["warmup_steps"], steps)
    record = Record()
    evaluate = Evaluate(trainer.evaluate, task.eval_data, cfg.eval_every, steps)
    run_dir = os.path.join(logdir, variant["slug"] + f"_seed{seed}")
    actions = [record, evaluate]
    if cfg.histogram_every:
        actions.append(
            Histograms(
                trainer.model,
                eval_inputs[:64],
                os.path.join(run_dir, "norms"),
                cfg.histogram_every,
            )
        )
    if cfg.gradient_variance_batches:
        actions.append(
            gradient_variance_action(
                trainer, task, seed, evaluate, weighted_cross_entropy
            )
        )
    # Last: the batch-statistics evaluation moves a batch norm's averages.
    measures = measurement_actions(trainer.model, task.eval_data, cfg.batch_size, steps)
    actions.extend(measures)
    writer = tf.summary.create_file_writer(run_dir)
    started = time.time()
    with writer.as_default():
        run_loop(_step_function(trainer, task, rates, seed), 0, steps, actions)
        for layer, norm in enumerate(init_norms):
            tf.summary.scalar("init_ffn_gradient_norm", norm, step=layer)
    writer.close()
    for action in actions[2:]:
        action.close()
    measures += [a for a in actions if isinstance(a, GradientVariance)]
    seconds = time.time() - started
    run = {
        "variant": variant["name"],
        "norm_position": trainer.position,
        "norm": trainer.norm,
        "num_layers": trainer.num_layers,
        "warmup_steps": variant["warmup_steps"],
        "learning_rate": variant["learning_rate"],
        "mean_learning_rate": float(np.mean(rates)),
        "steps": steps,
        "seed": seed,
        **_curves(record, evaluate.evals, task),
        "init_layer_gradient_norms": init_norms,
        "seconds": seconds,
        **task.final_measures(
            lambda *parts: trainer.evaluate(*(tf.constant(p) for p in parts))
        ),
    }
    for measure in measures:
        run.update(measure.record())
    log(f"  {variant['name']:<34} seed {seed}: {_outcome(run)}")
    return run


def _outcome(run):
    """The progress line's account of a finished run."""
    if "final_bits_per_byte" in run:
        result = f"held-out {run['final_bits_per_byte']:.3f} bits per byte"
    else:
        result = f"final accuracy {run['final_accuracy']:.3f}"
    return (
        f"{result}, steps to target: {run['steps_to_target'] or '-'}, "
        f"{run['step_ms']:.0f} ms/step"
    )


def _step_function(trainer, task, rates, seed):
    """One training step on a fresh batch at the schedule's learning rate."""
    rng = np.random.default_rng(10_000 + seed)
    batch_size, every = trainer.cfg.batch_size, trainer.cfg.eval_every

    def step_fn(step):
        batch = task.batch(rng, batch_size)
        rate = float(rates[step - 1])
        trainer.optimizer.learning_rate = rate
        started = time.perf_counter()
        loss, grad_norm, blocks, applied, scale, finite = trainer.train_step(
            *(tf.constant(part) for part in batch)
        )
        loss = float(loss)  # waits for the step
        logs = {
            "loss": loss,
            "gradient_norm": float(grad_norm),
            "applied": bool(applied),
            "loss_scale": float(scale),
            "weights_finite": bool(finite),
            "learning_rate": rate,
            "batch": batch,
            "step_seconds": time.perf_counter() - started,
        }
        if step % every == 0 or step == trainer.cfg.steps:
            logs["layer_gradient_norms"] = [float(n) for n in blocks.numpy()]
        return logs

    return step_fn


def _curves(record, evals, task):
    """A run's recorded curves and what the table reads from them.

    The gradient norm of step 0 (at the initial weights, the same for every
    variant of a seed) is kept apart from the early phase, steps 1 to
    `EARLY_STEPS`, where warm-up acts. The target is the task's accuracy,
    or (language modelling) its held-out loss threshold. The step time is
    the median over the run's steps: the first, which may compile, and the
    evaluations are left out by it.
    """
    reached = None
    if task.target_accuracy is not None:
        reached = next((s for s, acc, _ in evals if acc >= task.target_accuracy), None)
    elif task.target_loss is not None:
        reached = next((s for s, _, loss in evals if loss <= task.target_loss), None)
    norms = record.gradient_norms
    return {
        "losses": record.losses,
        "gradient_norms": norms,
        "layer_gradient_steps": record.block_steps,
        "layer_gradient_norms": record.block_norms,
        **gradient_spread(record.block_norms),
        "eval_steps": [s for s, _, _ in evals],
        "eval_accuracy": [a for _, a, _ in evals],
        "eval_loss": [v for _, _, v in evals],
        "final_accuracy": evals[-1][1],
        "final_eval_loss": evals[-1][2],
        "steps_to_target": reached,
        "step_ms": 1000.0 * float(np.median(record.step_seconds)),
        "gradient_norm_step0": norms[0],
        "max_gradient_norm_early": max(norms[1 : EARLY_STEPS + 1] or norms[:1]),
    }

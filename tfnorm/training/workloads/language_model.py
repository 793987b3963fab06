"""The workload of `tfnorm train --task lm`: a causal language model of text.

The model is `tfnorm.build_decoder` (its `preset`, with the run's model
settings over it) on byte tokens (`tfnorm.training.data.byte_text`): every
UTF-8 text trains as it is, with nothing to download or fit. Training
windows of `max_len + 1` bytes are visited in an order fixed by `seed`
(or, with `windows` "random", start at seeded random bytes),
with the same batch order, train step and replica split as the classifier's
(`workloads.steps`), so a checkpoint resumes exactly and the strategies work
as they do for it. The loss is the mean cross-entropy per token; the
validation metrics are that loss on the held-out end of the text, its
perplexity and its bits per byte.

Beside the checkpoints and the export, `language_model.json` in the logdir
says how the model is built and where its checkpoints are (relative to the
logdir, so a copied run directory reads its own), so that `tfnorm generate`
can sample from a run that is still training; `run_config.json` beside the
checkpoints records the recipe's SHA-256, so an edited recipe is refused
(`tfnorm.training.rundir.reading`).
"""

from __future__ import annotations

import math
import os

import numpy as np

from tfnorm import _keras
from tfnorm._safe_io import atomic_write_json
from tfnorm.training.data import byte_text
from tfnorm.training.data.token_text import read_token_corpus
from tfnorm.training.rundir import export, reading, run_identity
from tfnorm.training.rundir.reading import LANGUAGE_MODEL_FILE  # noqa: F401
from tfnorm.training.workloads import checkpoint_start, steps
from tfnorm.training.workloads.base import Workload
from tfnorm.training.workloads.build import (
    assemble,
    prepare_runtime,
    run_optimizer,
    run_schedule,
    wrap_and_build,
)

#: Windows the norm probes (NaN guard, histograms) and the export check read.
PROBE_WINDOWS = 8


def decoder_arguments(config):
    """The keyword arguments of `tfnorm.build_decoder` for the run's settings
    (with `init_from`, the checkpoint's, `norm` over them)."""
    if config.init_from is not None:
        return checkpoint_start.start_arguments(config)
    vocab_size = byte_text.VOCAB_SIZE
    if config.tokenizer != "bytes":
        vocab_size = checkpoint_start.tokenizer_vocab_size(config)
    arguments = {
        "num_layers": config.num_layers,
        "d_model": config.d_model,
        "num_heads": config.num_heads,
        "dff": config.dff,
        "vocab_size": vocab_size,
        "max_len": config.max_len,
        "preset": config.preset,
        "norm_position": config.norm_position,
        "dropout_rate": config.dropout_rate,
    }
    if config.feed_forward is not None:
        arguments["feed_forward"] = config.feed_forward
    if config.bias is not None:
        arguments["use_bias"] = config.bias
    if config.init_std is not None:
        arguments["init_std"] = config.init_std
    if config.norm is not None:
        arguments["norm"] = config.norm
    if config.epsilon is not None:
        arguments["epsilon"] = config.epsilon
    return arguments


class LanguageModelWorkload(Workload):
    """`build_decoder` trained on byte tokens of text files."""

    evaluates_at_start = True

    def __init__(self, config, log):
        super().__init__(config, log)
        self.corpus = None
        self.tokens_per_example = config.max_len
        # The checkpoint's tokenizer with `init_from`; None: bytes.
        self.tokenizer = None

    @property
    def source(self):
        files = self.corpus.files
        return files[0] if len(files) == 1 else f"{len(files)} text files"

    def load(self, saved, has_checkpoint):
        config = self.config
        tokenizer = checkpoint_start.run_tokenizer(config, has_checkpoint)
        if tokenizer is not None:
            self.corpus, self.tokenizer = read_token_corpus(
                config.data, config.max_len, config.val_split, tokenizer
            )
        else:
            self.corpus = byte_text.read_corpus(
                config.data, config.max_len, config.val_split
            )
        if has_checkpoint:
            run_identity.check_same_run(config, saved, self.corpus.sha256, self.log)
            checkpoint_start.check_same_tokenizer(saved, self.tokenizer)
        report = self.corpus.report
        kind = "byte" if self.tokenizer is None else "checkpoint-tokenizer"
        self.log.line(
            f"language model on {report['train_tokens']} training and "
            f"{report['val_tokens']} validation {kind} tokens (the last "
            f"{report['val_split']:.0%} of the text)"
            + _baseline(report["val_unigram_bits_per_byte"])
        )
        warning = byte_text.small_validation_warning(report)
        if warning:
            self.log.line(warning)
        self.data_summary = {
            "source": self.source,
            "train_examples": len(self.corpus.train),
            "vocab_size": self.vocab_size,
            "sha256": self.corpus.sha256,
            **report,
        }

    @property
    def vocab_size(self):
        if self.tokenizer is None:
            return byte_text.VOCAB_SIZE
        return self.tokenizer.vocab_size

    def __len__(self):
        return len(self.corpus.train)

    def steps_per_epoch(self, batch_size):
        return math.ceil(len(self.corpus.train) / batch_size)

    def build(self, total_steps):
        from tfnorm.models import build_decoder

        config = self.config
        strategy, policy = prepare_runtime(config)
        with strategy.scope(), _keras.checkpointable_random_state():
            if config.init_from is not None:
                model = checkpoint_start.starting_model(config, self.log)
            else:
                model = build_decoder(**decoder_arguments(config))
            schedule = run_schedule(config, total_steps)
            optimizer = run_optimizer(config, model, schedule)
            optimizer = wrap_and_build(optimizer, model)
            return assemble(strategy, policy, model, schedule, optimizer)

    @property
    def probe_batch(self):
        train = self.corpus.train
        return train.batch(np.arange(min(len(train), PROBE_WINDOWS)))[0]

    def identity(self):
        return {
            "data_sha256": self.corpus.sha256,
            "vocab_size": self.vocab_size,
            "tokenizer": "bytes" if self.tokenizer is None else "tokenizer.json",
            **checkpoint_start.tokenizer_identity(self.tokenizer),
            reading.DECODER_DIGEST_KEY: reading.decoder_digest(
                decoder_arguments(self.config)
            ),
        }

    def write_files(self, paths):
        recipe = reading.language_model_recipe(
            decoder_arguments(self.config),
            paths.logdir,
            paths.checkpoint_dir,
            byte_text.END_OF_TEXT,
        )
        if self.tokenizer is not None:
            recipe["tokenizer"] = checkpoint_start.save_tokenizer(
                self.tokenizer, paths.logdir
            )
            recipe["end_of_text"] = self.tokenizer.eos_id
        atomic_write_json(os.path.join(paths.logdir, LANGUAGE_MODEL_FILE), recipe)

    def step_fn(self, setup):
        config = self.config
        train = self.corpus.train
        # Per-token mean loss: the step divides the summed token losses by
        # every token of the global batch.
        train_step = steps.make_train_step(
            setup.model,
            setup.optimizer,
            setup.strategy,
            config.batch_size * config.max_len,
            jit_compile=config.jit_compile,
        )
        seen = int(setup.examples_seen.numpy())
        if config.windows == "random":
            batches = train.random_batches(config.batch_size, config.seed, seen)
        else:
            order = steps.index_batches(
                len(train), config.batch_size, config.seed, seen
            )
            batches = (train.batch(indices) for indices in order)

        def step_fn(step):
            inputs, targets = next(batches)
            loss, correct, applied = train_step(
                *steps.to_replicas(setup.strategy, inputs, targets)
            )
            setup.step.assign(step)
            setup.examples_seen.assign_add(config.batch_size)
            # The progress line divides by the batch size: a token accuracy.
            return steps.step_logs(
                loss, float(correct) / config.max_len, applied, setup.optimizer
            )

        return step_fn

    def evaluate_fn(self, setup):
        if self.corpus.val is None:
            return None
        eval_step = make_eval_step(setup.model)
        val_bytes = self.corpus.report.get("val_bytes")
        return lambda: evaluate(
            eval_step, self.corpus.val, self.config.batch_size, val_bytes
        )

    def estimate_fn(self, setup):
        batches = self.config.eval_batches
        if self.corpus.val is None or batches is None:
            return None
        eval_step = make_eval_step(setup.model)
        size = self.config.batch_size
        val_bytes = self.corpus.report.get("val_bytes")
        return lambda: evaluate(
            eval_step, self.corpus.val, size, val_bytes, batches=batches
        )

    def export(self, model, directory):
        arguments = ", ".join(
            f"{key}={value!r}" for key, value in decoder_arguments(self.config).items()
        )
        rebuild = f"import tfnorm; model = tfnorm.build_decoder({arguments})"
        return export.export_model(model, directory, self.probe_batch, rebuild)


def _baseline(bits):
    if bits is None:
        return ""
    return f"; a unigram model of the training bytes: {bits:.3f} bits per byte"


def make_eval_step(model):
    """A compiled step: `(inputs, targets) -> (summed token loss, correct tokens)`."""
    tf = _keras.tf

    @tf.function(
        autograph=False,
        input_signature=[tf.TensorSpec([None, None], tf.int32)] * 2,
    )
    def eval_step(inputs, targets):
        logits = tf.cast(model(inputs, training=False), tf.float32)
        return (
            tf.reduce_sum(steps.sparse_cross_entropy(targets, logits)),
            steps.correct_count(targets, logits),
        )

    return eval_step


def estimate_windows(count, batches, batch_size):
    """The windows an estimate from `batches` batches reads: spread evenly
    over the held-out text, the same ones at every evaluation (so the
    estimates of a run are comparable); None when that is all of them."""
    wanted = batches * batch_size
    if wanted >= count:
        return None
    return np.unique(np.linspace(0, count - 1, wanted).round().astype(np.int64))


def evaluate(eval_step, windows, batch_size, val_bytes=None, batches=None):
    """Loss per token of the held-out text (every token but its first
    predicted once), its perplexity and bits per byte, and token accuracy.

    Bits per byte: the summed loss over the bytes the predicted tokens
    cover, `val_bytes` (None: one byte a token, tfnorm's byte tokens), so
    models of different tokenizers compare. With `batches`, an estimate from
    that many batches of windows spread over the text (`estimate_windows`),
    or all of it when it holds no more; an estimate's bytes are `val_bytes`
    in proportion to the tokens it reads.
    """
    tf = _keras.tf
    total_loss = total_correct = 0.0
    chosen = estimate_windows(len(windows), batches, batch_size) if batches else None
    order = np.arange(len(windows)) if chosen is None else chosen
    pieces = [
        windows.batch(order[start : start + batch_size])
        for start in range(0, len(order), batch_size)
    ]
    if windows.tail is not None and chosen is None:
        tail = windows.tail
        pieces.append((tail[None, :-1], tail[None, 1:]))
    tokens = 0
    for inputs, targets in pieces:
        loss, correct = eval_step(tf.constant(inputs), tf.constant(targets))
        total_loss += float(loss)
        total_correct += float(correct)
        tokens += targets.size
    mean = total_loss / tokens
    if val_bytes and chosen is not None:
        val_bytes = val_bytes * tokens / max(_predicted_tokens(windows), 1)
    return {
        "val_loss": mean,
        "val_perplexity": math.exp(min(mean, 700.0)),
        "val_bits_per_byte": total_loss / (val_bytes or tokens) / math.log(2.0),
        "val_accuracy": total_correct / tokens,
    }


def _predicted_tokens(windows):
    """How many tokens a whole evaluation of `windows` predicts."""
    count = len(windows) * windows.batch(np.arange(1))[1].size
    if windows.tail is not None:
        count += len(windows.tail) - 1
    return count

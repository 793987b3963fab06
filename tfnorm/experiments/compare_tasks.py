"""The tasks of `tfnorm compare` (`make_task`).

* `ReverseTask`, token-level and synthetic: the target sequence is the input
  reversed, which needs attention across the whole sequence. Fresh random
  batches at every step; token accuracy on a fixed evaluation set (chance =
  1 / vocab_size). `tfnorm.experiments.padded_task.PaddedReverseTask` is
  its padded, variable-length form.
* `tfnorm.experiments.text_task.MaskedTextTask`: BERT-style masked-language
  modelling on the Python language reference's prose.
* `tfnorm.experiments.lm_task.ByteTextTask`: next-byte prediction on the
  same text, for causal decoders.

Each gives batches as `(inputs, targets, weights)`: the loss and the
accuracy are weighted means over tokens (all ones for reverse, the masked
positions for mlm, the real tokens for padded sequences).
"""

from __future__ import annotations

import numpy as np


def reverse_task(rng, count, seq_len, vocab_size):
    """`count` random token sequences and their reversals, as int32 arrays."""
    tokens = rng.integers(0, vocab_size, size=(count, seq_len)).astype("int32")
    return tokens, tokens[:, ::-1].copy()


class ReverseTask:
    """The synthetic "reverse" task: target = input reversed."""

    name = "reverse"
    description = "token reversal (target = input reversed), synthetic"
    target_accuracy = 0.95
    #: No loss threshold: the target is the accuracy.
    target_loss = None

    def __init__(self, vocab_size, seq_len, eval_size):
        self.vocab_size, self.seq_len = vocab_size, seq_len
        tokens, targets = reverse_task(
            np.random.default_rng(12_345), eval_size, seq_len, vocab_size
        )
        self.eval_data = (tokens, targets, np.ones(tokens.shape, "float32"))
        self.chance = 1.0 / vocab_size
        self.sizes = {"eval_sequences": int(eval_size)}

    def batch(self, rng, batch_size):
        tokens, targets = reverse_task(rng, batch_size, self.seq_len, self.vocab_size)
        return tokens, targets, np.ones(tokens.shape, "float32")

    def final_measures(self, evaluate):
        """Nothing beyond the curves: the evaluation set is the whole measure."""
        return {}


def make_task(cfg):
    """The task `cfg.task` names, at `cfg`'s sizes."""
    if cfg.task == "lm":
        from tfnorm.experiments.lm_task import ByteTextTask

        return ByteTextTask(cfg.seq_len, cfg.eval_size)
    if cfg.task == "mlm":
        from tfnorm.experiments.text_task import MaskedTextTask

        return MaskedTextTask(
            cfg.vocab_size, cfg.seq_len, cfg.eval_size, unit=cfg.text_unit
        )
    if cfg.variable_length:
        from tfnorm.experiments.padded_task import PaddedReverseTask

        return PaddedReverseTask(cfg.vocab_size, cfg.seq_len, cfg.eval_size)
    return ReverseTask(cfg.vocab_size, cfg.seq_len, cfg.eval_size)

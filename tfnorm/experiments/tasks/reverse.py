"""`ReverseTask`: the synthetic "reverse" task of `tfnorm compare`."""

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

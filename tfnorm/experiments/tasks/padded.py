"""The reverse task on padded, variable-length sequences (`variable_length`).

Each sequence has its own length, drawn uniformly from 1 to `seq_len`, and
is padded at the end with token 0; its real tokens are 1 to `vocab_size`.
The target of a real position `i` of a sequence of length `n` is its token
`n - 1 - i` (the real part reversed). Padding is masked in the loss and the
accuracy (weight 0), in attention (the encoder's padding mask) and, for a
norm whose statistics span positions, in those statistics (the batch-norm
control of `tfnorm.experiments.controls`, where Keras can mask).
"""

from __future__ import annotations

import numpy as np

#: The padding token; real tokens are 1 .. vocab_size.
PAD_ID = 0


def padded_reverse_task(rng, count, seq_len, vocab_size):
    """`(tokens, targets, weights)` of `count` padded sequences, as NumPy arrays."""
    lengths = rng.integers(1, seq_len + 1, size=count)
    real = np.arange(seq_len)[None, :] < lengths[:, None]
    drawn = rng.integers(1, vocab_size + 1, size=(count, seq_len))
    tokens = np.where(real, drawn, PAD_ID).astype("int32")
    # Position i of a length-n row reads position n - 1 - i.
    source = np.clip(lengths[:, None] - 1 - np.arange(seq_len)[None, :], 0, None)
    targets = np.where(real, np.take_along_axis(tokens, source, axis=1), PAD_ID)
    return tokens, targets.astype("int32"), real.astype("float32")


class PaddedReverseTask:
    """The reverse task with random lengths and end padding (see the module)."""

    name = "reverse"
    target_accuracy = 0.95
    #: No loss threshold: the target is the accuracy.
    target_loss = None
    pad_id = PAD_ID

    def __init__(self, vocab_size, seq_len, eval_size):
        self.description = (
            "token reversal of padded, variable-length sequences "
            f"(lengths 1-{seq_len}), synthetic"
        )
        self.seq_len = seq_len
        # The padding token has an embedding row and a logit like any other.
        self.vocab_size = vocab_size + 1
        self.real_vocab_size = vocab_size
        self.eval_data = padded_reverse_task(
            np.random.default_rng(12_345), eval_size, seq_len, vocab_size
        )
        self.chance = 1.0 / vocab_size
        self.sizes = {
            "eval_sequences": int(eval_size),
            "variable_length": True,
            "eval_padding_fraction": float(1.0 - self.eval_data[2].mean()),
        }

    def batch(self, rng, batch_size):
        return padded_reverse_task(rng, batch_size, self.seq_len, self.real_vocab_size)

    def final_measures(self, evaluate):
        """Nothing beyond the curves: the evaluation set is the whole measure."""
        return {}

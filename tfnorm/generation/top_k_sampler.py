"""`TopKSampler`: sampling among the `k` likeliest tokens."""

from __future__ import annotations

from tfnorm._checks import check_positive_int
from tfnorm._keras import tf
from tfnorm.generation.sampler import Sampler


class TopKSampler(Sampler):
    """Samples from `softmax(logits / temperature)` over the `k` largest logits.

    `k` is capped at the vocabulary size when sampling (a `k` above it
    samples among all tokens).

    Example:

    >>> from tfnorm.generation import TopKSampler
    >>> TopKSampler(20, temperature=0.8)
    TopKSampler(k=20, temperature=0.8)

    Args:
        k: int >= 1, the candidates. (0 is refused: "no limit" is the plain
            `Sampler`.)
        temperature: float >= 0, see `Sampler`. Defaults to `1.0`.

    Raises:
        ValueError: naming `top_k` (the name `generate` and the CLI use).
    """

    def __init__(self, k, temperature=1.0):
        super().__init__(temperature)
        self.k = check_positive_int("top_k", k)

    def next_token(self, logits, seed):
        values, indices = tf.math.top_k(logits, k=min(self.k, logits.shape[-1]))
        return tf.gather(indices, self.sample(values, seed), batch_dims=1)

    def get_config(self):
        return {"k": self.k, **super().get_config()}

"""`GreedySampler`: the likeliest token, every step."""

from __future__ import annotations

from tfnorm._keras import tf
from tfnorm.generation.sampler import Sampler


class GreedySampler(Sampler):
    """Picks `argmax(logits)`: what any sampler does at temperature 0.

    Example:

    >>> from tfnorm.generation import GreedySampler
    >>> GreedySampler()
    GreedySampler(temperature=0.0)
    """

    def __init__(self, temperature=0.0):
        super().__init__(temperature)

    def next_token(self, logits, seed):
        return tf.argmax(logits, axis=-1, output_type=tf.int32)

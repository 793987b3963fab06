"""`TopPSampler`: nucleus sampling."""

from __future__ import annotations

from tfnorm._checks import check_number
from tfnorm._keras import tf
from tfnorm.generation.sampler import Sampler


class TopPSampler(Sampler):
    """Samples from the smallest set of tokens, most likely first, whose
    probability (at the temperature) reaches `p`; the likeliest token is
    always in it.

    Example:

    >>> from tfnorm.generation import TopPSampler
    >>> TopPSampler(0.9)
    TopPSampler(p=0.9, temperature=1.0)

    Args:
        p: float in (0, 1], the probability mass kept.
        temperature: float >= 0, see `Sampler`. Defaults to `1.0`.

    Raises:
        ValueError: naming `top_p` (the name `generate` and the CLI use).
    """

    def __init__(self, p, temperature=1.0):
        super().__init__(temperature)
        self.p = check_number("top_p", p, above=0.0, maximum=1.0)

    def next_token(self, logits, seed):
        values, indices = tf.math.top_k(logits, k=logits.shape[-1])
        before = tf.math.cumsum(tf.nn.softmax(values), axis=-1, exclusive=True)
        # The most likely token always stays (the mass before it is 0).
        kept = tf.where(before < self.p, values, tf.float32.min)
        return tf.gather(indices, self.sample(kept, seed), batch_dims=1)

    def get_config(self):
        return {"p": self.p, **super().get_config()}

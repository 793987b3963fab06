"""`Sampler`: how the next token is chosen from a language model's logits.

A sampler owns the `temperature` and one hook, `next_token(logits, seed)`,
which picks a token per row from logits already divided by the
temperature. Temperature 0 means the likeliest token (greedy) for every
sampler: the hook is not called. The base class samples from the whole
softmax; `GreedySampler`, `TopKSampler` and `TopPSampler` override the hook,
and so does a user's sampler:

>>> import tensorflow as tf
>>> from tfnorm.generation import Sampler
>>> class NeverToken0(Sampler):
...     def next_token(self, logits, seed):
...         first = tf.range(logits.shape[-1]) == 0
...         return self.sample(tf.where(first, -1e9, logits), seed)
>>> NeverToken0(temperature=0.7)
NeverToken0(temperature=0.7)

Sampling uses stateless random ops (`sample`): the same seed gives the same
tokens, and row `i` of a batch draws from its own stream of the seed.
"""

from __future__ import annotations

from tfnorm._checks import check_number
from tfnorm._keras import tf


class Sampler:
    """Samples the next token from `softmax(logits / temperature)`.

    Subclasses override `next_token` only.

    Args:
        temperature: float >= 0; divides the logits before `next_token`.
            0 picks the likeliest token (greedy). Defaults to `1.0`.

    Raises:
        ValueError: a negative or non-finite temperature (naming it).
    """

    def __init__(self, temperature=1.0):
        self.temperature = check_number("temperature", temperature, minimum=0.0)

    def __call__(self, logits, seed, temperature=None):
        """Token ids `(batch,)` int32 for float `logits` `(batch, vocab)`.

        `seed` is a stateless seed `[2]` (int64) for this step; `temperature`
        a scalar tensor that replaces `self.temperature`'s value (so that a
        compiled loop does not retrace per temperature), or None.
        """
        if self.temperature == 0:
            return tf.argmax(logits, axis=-1, output_type=tf.int32)
        divisor = self.temperature if temperature is None else temperature
        return self.next_token(logits / divisor, seed)

    def next_token(self, logits, seed):
        """The hook: one token id per row of `logits` (divided by the
        temperature already). Draw with `self.sample` for reproducible ids."""
        return self.sample(logits, seed)

    @staticmethod
    def sample(logits, seed):
        """One draw per row from `softmax(logits)`: the Gumbel-max trick.

        Row `i` draws its noise from the stateless stream `(seed[0], seed[1]
        + i * 2**20)`, so a row's draws depend on its index and the step, not
        on the batch size. Stateless uniform draws compile under XLA in every
        runtime (`stateless_categorical` does not in every one).
        """
        rows, vocab = logits.shape
        uniform = tf.stack(
            [
                tf.random.stateless_uniform(
                    [vocab],
                    seed + tf.constant([0, row * 2**20], seed.dtype),
                    minval=1e-20,
                    maxval=1.0,
                    dtype=tf.float32,
                )
                for row in range(rows)
            ]
        )
        gumbel = -tf.math.log(-tf.math.log(uniform))
        return tf.argmax(logits + gumbel, axis=-1, output_type=tf.int32)

    def get_config(self):
        """The constructor's arguments."""
        return {"temperature": self.temperature}

    def compile_key(self):
        """What a compiled loop depends on: the class and every argument but
        the temperature's value (passed as a tensor), greedy or not."""
        config = dict(self.get_config())
        config.pop("temperature", None)
        return (type(self), self.temperature == 0, tuple(sorted(config.items())))

    def __repr__(self):
        arguments = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({arguments})"

"""The fast path and the careful path of a formula, and the choice between
them.

Statistics are float32 and two-pass. In graph mode the mean is not shifted
first (that costs a pass): rows whose mean is large next to their spread,
or whose squares overflow float32, are redone by a careful path chosen with
`tf.cond` (`_careful_layer_norm` and `_careful_rms_norm` in the formula
modules).
"""

from __future__ import annotations

from tfnorm._keras import tf


def row_scale(reduce, x):
    """Per-row max(|x|, 1): dividing by it keeps squares finite."""
    return tf.maximum(reduce.max_abs(x), tf.constant(1.0, x.dtype))


def guarded(fine, fast_x_hat, careful_x_hat, reduce, gamma, beta):
    """The output through the fast or the careful path (`tf.cond` on
    `fine`), and a function giving (x_hat, inv) for the backward pass.

    `fast_x_hat`/`careful_x_hat` return (x_hat, the factor the backward pass
    scales by). Graph mode writes x_hat out on the way to the output anyway,
    so the cond hands it to the backward pass too; under XLA x_hat fuses
    into the output and is only computed again if a gradient is taken.
    """

    def through(path):
        def output():
            x_hat, inv = path()
            return reduce.affine(x_hat, gamma, beta), x_hat, inv

        return output

    if reduce.fuses:
        y = tf.cond(
            fine, lambda: through(fast_x_hat)()[0], lambda: through(careful_x_hat)()[0]
        )
        return y, lambda: tf.cond(fine, fast_x_hat, careful_x_hat)
    y, x_hat, inv = tf.cond(fine, through(fast_x_hat), through(careful_x_hat))
    return y, lambda: (x_hat, inv)

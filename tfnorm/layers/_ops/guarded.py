"""The fast path and the careful path of a formula, and the choice between
them.

Statistics are float32 and two-pass. The mean is not shifted first (in
graph mode that costs a pass; under XLA see `guarded_statistics`): rows
whose mean is large next to their spread, or whose squares overflow
float32, are redone by a careful path chosen with `tf.cond` (the
`_careful_statistics` of LayerNorm and the `_scaled_statistics` of RMSNorm,
in the formula modules). Under XLA the cond hands the backward pass the
per-row statistics and x instead of x_hat (`guarded_statistics`).
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
    so the cond hands it to the backward pass too.
    """

    def through(path):
        def output():
            x_hat, inv = path()
            return reduce.affine(x_hat, gamma, beta), x_hat, inv

        return output

    y, x_hat, inv = tf.cond(fine, through(fast_x_hat), through(careful_x_hat))
    return y, lambda: (x_hat, inv)


def guarded_statistics(fine, x, fast_statistics, careful_statistics, output):
    """(y, x, statistics): the per-row statistics of the fast or the careful
    path (`tf.cond` on `fine`), `output(*statistics)` made with them, and
    the norm's input `x` handed back by the cond, for XLA.

    Under XLA a conditional writes out its results: here y (the next
    layer's input, written out anyway), the per-row statistics and x, not
    x_hat. The backward pass makes x_hat again from the x the cond hands
    back and the statistics, fused into its reductions. XLA cannot make
    that x again from its producers; from the x given to the cond it did,
    in a Post-LN block the residual sum of a dropout (the sublayer's
    output, the previous block's output and the dropout's mask read again)
    in several of the backward's fusions: the norms cost TensorFlow 2.9's
    Post-LN encoder step under XLA 1.75-2.27x what Keras's cost, now
    about what Keras's cost (0.92-1.31x across idle runs of
    `bench/encoder.py`, docs/benchmarks.md).
    The copy of x costs the norm timed alone one full-size buffer, and a
    Post-LN block's step none. Taking anything of x outside the cond (the
    sample a LayerNorm row is shifted by, a slice of x) let XLA recompute
    x in each of its users as well. With x_hat made inside the cond, a
    Pre-LN step kept one more x_hat per norm than Keras's.

    The branches make their own float32 view of a half-precision x and
    return y in the output dtype: XLA writes out a conditional's operands
    and results, so a cast outside the cond costs a float32 copy of x and a
    float32 y (a bfloat16 LayerNorm forward ran at 1.21-1.29x Keras's).
    """

    def through(statistics):
        def branch():
            values = tuple(statistics())
            return (output(*values), tf.identity(x)) + values

        return branch

    y, kept, *statistics = tf.cond(
        fine, through(fast_statistics), through(careful_statistics)
    )
    return y, kept, statistics

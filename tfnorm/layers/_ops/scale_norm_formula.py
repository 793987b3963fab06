"""ScaleNorm: the formula and its careful path (plain reductions whatever
the route, gradient by autodiff)."""

from __future__ import annotations

from tfnorm._keras import tf
from tfnorm.layers._ops.guarded import row_scale
from tfnorm.layers._ops.primitives import Reductions


def scale_norm(x, scale, axes, epsilon):
    """y = scale * x / max(||x||_2, epsilon) over `axes`."""
    # max(||x||, eps) as rsqrt(max(||x||^2, eps^2)): the gradient of sqrt at
    # an all-zero row (padding) would be 0 * inf = NaN.
    squared_norm = tf.reduce_sum(tf.square(x), axes, keepdims=True)

    def careful():
        # |x| >= ~1e19 overflows the sum of squares: divide by the row's
        # largest magnitude first (the result is unchanged).
        divisor = tf.stop_gradient(row_scale(Reductions(x.shape.rank, axes), x))
        scaled = x / divisor
        norm = tf.reduce_sum(tf.square(scaled), axes, keepdims=True)
        floor = tf.square(epsilon / divisor)
        return scaled * (scale * tf.math.rsqrt(tf.maximum(norm, floor)))

    def plain():
        return x * (scale * tf.math.rsqrt(tf.maximum(squared_norm, epsilon * epsilon)))

    return tf.cond(tf.reduce_all(tf.math.is_finite(squared_norm)), plain, careful)

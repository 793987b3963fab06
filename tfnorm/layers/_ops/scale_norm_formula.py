"""ScaleNorm: the formula and its careful path (plain reductions whatever
the route, gradient by autodiff)."""

from __future__ import annotations

from tfnorm._keras import tf
from tfnorm.layers._ops.guarded import row_scale
from tfnorm.layers._ops.primitives import Reductions
from tfnorm.layers.arguments import in_statistics_dtype, statistics_dtype


def scale_norm(x, scale, axes, epsilon, output_dtype=None):
    """y = scale * x / max(||x||_2, epsilon) over `axes`, computed in `x`'s
    statistics dtype and returned in `output_dtype` (by default that dtype).

    The float32 view of a half-precision x is made inside each branch of
    the cond: see `guarded.guarded_statistics`."""
    output_dtype = output_dtype or statistics_dtype(x.dtype)
    # max(||x||, eps) as rsqrt(max(||x||^2, eps^2)): the gradient of sqrt at
    # an all-zero row (padding) would be 0 * inf = NaN.
    squared_norm = tf.reduce_sum(tf.square(in_statistics_dtype(x)), axes, keepdims=True)

    def careful():
        # |x| >= ~1e19 overflows the sum of squares: divide by the row's
        # largest magnitude first (the result is unchanged).
        wide = in_statistics_dtype(x)
        divisor = tf.stop_gradient(row_scale(Reductions(wide.shape.rank, axes), wide))
        scaled = wide / divisor
        norm = tf.reduce_sum(tf.square(scaled), axes, keepdims=True)
        floor = tf.square(epsilon / divisor)
        y = scaled * (scale * tf.math.rsqrt(tf.maximum(norm, floor)))
        return tf.cast(y, output_dtype)

    def plain():
        factor = scale * tf.math.rsqrt(tf.maximum(squared_norm, epsilon * epsilon))
        return tf.cast(in_statistics_dtype(x) * factor, output_dtype)

    return tf.cond(tf.reduce_all(tf.math.is_finite(squared_norm)), plain, careful)

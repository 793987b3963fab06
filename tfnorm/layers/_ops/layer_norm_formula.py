"""LayerNorm: the formula, its careful path and its analytic backward pass.

Autodiff of the forward graph materialises several full-size
intermediates, while the closed form here needs one pass over `dy` and the
saved `x_hat`.
"""

from __future__ import annotations

from tfnorm._keras import tf
from tfnorm.layers._ops.guarded import guarded, guarded_statistics, row_scale
from tfnorm.layers._ops.routes import normalize
from tfnorm.layers.arguments import in_statistics_dtype, statistics_dtype

#: A row whose mean exceeds this many standard deviations is normalised
#: through the careful path. A float32 row mean is off by up to ~2e-7 of the
#: mean (measured for 16 to 16384 features), and that error lands in every
#: output divided by the standard deviation: below this ratio it stays under
#: ~2e-6, well inside float32 LayerNorm's 1e-5 tolerance.
_MEAN_TO_STD_LIMIT = 8.0


def layer_norm(x, gamma, beta, axes, epsilon, output_dtype=None):
    """y = (x - mean) * rsqrt(var + epsilon) * gamma + beta over `axes`,
    computed in `x`'s statistics dtype and returned in `output_dtype` (by
    default that dtype)."""
    output_dtype = output_dtype or statistics_dtype(x.dtype)
    return normalize(_layer_norm_kernel, x, gamma, beta, axes, epsilon, output_dtype)


def _statistics(x, reduce, epsilon):
    """(centred, mean, inv_std, fine): the fast path's two-pass statistics,
    and whether every row can use them."""
    mean = reduce.mean(x)
    centred = x - mean
    inv_std = tf.math.rsqrt(reduce.mean_square(centred) + epsilon)
    # 1 / std is 0 where the squares overflowed; NaN compares False.
    fine = tf.reduce_all((inv_std > 0) & (tf.abs(mean) * inv_std <= _MEAN_TO_STD_LIMIT))
    return centred, mean, inv_std, fine


def _careful_statistics(x, reduce, epsilon):
    """(shift, inv_scale, mean, inv_std) for rows the fast statistics cannot
    serve: x_hat = ((x - shift) * inv_scale - mean) * inv_std.

    The shift is one sample per row: the shifted values are small next to
    their spread, so their float32 mean is exact to float32 resolution (a
    plain float32 mean of values ~1e4 is off by ~1e-3, in every output).
    `1 / inv_scale` is the shifted row's largest magnitude (at least 1):
    dividing by it keeps the squares finite (|x| >= ~1e19 overflows float32
    otherwise), epsilon scaled to match. Shift and scale cancel
    mathematically: the backward pass is unchanged.
    """
    shift = tf.stop_gradient(reduce.first_sample(x))
    shifted = x - shift
    scale = tf.stop_gradient(row_scale(reduce, shifted))
    inv_scale = 1.0 / scale
    # XLA writes a division out rather than repeat it in each of its users,
    # so each division here has one user; and squares take a quotient, not
    # a product by the reciprocal, which XLA may regroup as x * x * c * c
    # (inf * 0 where the squares overflow).
    mean = reduce.mean(shifted * inv_scale)
    inv = tf.math.rsqrt(
        reduce.mean_square(shifted / scale - mean) + epsilon * tf.square(inv_scale)
    )
    return shift, inv_scale, mean, inv


def _x_hat(x, shift, inv_scale, mean, inv_std):
    return ((x - shift) * inv_scale - mean) * inv_std


def _graph_layer_norm(x, reduce, epsilon, gamma, beta, output_dtype):
    """(y, saved) where every op is its own pass over memory: the fast path
    hands the x_hat it writes out on the way to y to the backward pass."""
    x = in_statistics_dtype(x)
    centred, _, inv_std, fine = _statistics(x, reduce, epsilon)

    def careful_x_hat():
        shift, inv_scale, mean, inv = _careful_statistics(x, reduce, epsilon)
        return _x_hat(x, shift, inv_scale, mean, inv), inv * inv_scale

    y, saved = guarded(
        fine, lambda: (centred * inv_std, inv_std), careful_x_hat, reduce, gamma, beta
    )
    return tf.cast(y, output_dtype), saved


def _xla_layer_norm(x, reduce, epsilon, gamma, beta, output_dtype):
    """(y, saved) under XLA, where x_hat fuses into its users: only the
    statistics and the x the cond hands back are kept for the backward
    pass (see `guarded_statistics`)."""
    _, mean, inv_std, fine = _statistics(in_statistics_dtype(x), reduce, epsilon)

    def fast_statistics():
        return tf.zeros_like(mean), tf.ones_like(mean), mean, inv_std

    def output(*statistics):
        x_hat = _x_hat(in_statistics_dtype(x), *statistics)
        return tf.cast(reduce.affine(x_hat, gamma, beta), output_dtype)

    y, kept, statistics = guarded_statistics(
        fine,
        x,
        fast_statistics,
        lambda: _careful_statistics(in_statistics_dtype(x), reduce, epsilon),
        output,
    )
    _, inv_scale, _, inv = statistics
    return y, lambda: (_x_hat(in_statistics_dtype(kept), *statistics), inv * inv_scale)


def _layer_norm_kernel(x, gamma, beta, reduce, epsilon, output_dtype):
    params = [p for p in (gamma, beta) if p is not None]
    forward_of = _xla_layer_norm if reduce.fuses else _graph_layer_norm

    @tf.custom_gradient
    def _forward(x, *params):
        y, saved = forward_of(x, reduce, epsilon, gamma, beta, output_dtype)

        def backward(dy):
            x_hat, inv = saved()
            g, param_grads = reduce.affine_grad(
                tf.cast(dy, x_hat.dtype), x_hat, gamma, beta
            )
            dx = reduce.centred_grad(g, x_hat, inv)
            return [tf.cast(dx, x.dtype)] + param_grads

        return y, backward

    return _forward(x, *params)

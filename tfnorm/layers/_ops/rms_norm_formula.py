"""RMSNorm: the formula, its careful path and its analytic backward pass,
and partial RMSNorm.

Autodiff of the forward graph materialises several full-size
intermediates, while the closed form here needs one pass over `dy` and the
saved `x_hat`.
"""

from __future__ import annotations

from tfnorm._keras import tf
from tfnorm.layers._ops.guarded import guarded, guarded_statistics, row_scale
from tfnorm.layers._ops.primitives import Reductions
from tfnorm.layers._ops.routes import normalize
from tfnorm.layers.arguments import in_statistics_dtype, statistics_dtype


def rms_norm(x, gamma, beta, axes, epsilon, output_dtype=None):
    """y = x * rsqrt(mean(x^2) + epsilon) * gamma + beta over `axes`,
    computed in `x`'s statistics dtype and returned in `output_dtype` (by
    default that dtype)."""
    output_dtype = output_dtype or statistics_dtype(x.dtype)
    return normalize(_rms_norm_kernel, x, gamma, beta, axes, epsilon, output_dtype)


def _scaled_statistics(x, reduce, epsilon):
    """(inv_scale, inv_rms) of `x * inv_scale`, `1 / inv_scale` the row's
    largest magnitude (at least 1), for rows whose squares overflow float32
    (|x| >= ~1e19, all-zero outputs otherwise); epsilon scaled to match."""
    # The square of a quotient, not of a product by the reciprocal: see
    # `layer_norm_formula._careful_statistics`.
    scale = tf.stop_gradient(row_scale(reduce, x))
    inv_scale = 1.0 / scale
    inv = tf.math.rsqrt(reduce.mean_square(x / scale) + epsilon * tf.square(inv_scale))
    return inv_scale, inv


def _rms_norm_kernel(x, gamma, beta, reduce, epsilon, output_dtype):
    params = [p for p in (gamma, beta) if p is not None]

    @tf.custom_gradient
    def _forward(x, *params):
        inv_rms = tf.math.rsqrt(reduce.mean_square(in_statistics_dtype(x)) + epsilon)
        # 1 / rms is 0 where the squares overflowed.
        fine = tf.reduce_all(inv_rms > 0)

        if reduce.fuses:
            # The casts are made in the branches: see `guarded_statistics`.
            def output(inv_scale, inv):
                x_hat = in_statistics_dtype(x) * inv_scale * inv
                return tf.cast(reduce.affine(x_hat, gamma, beta), output_dtype)

            y, kept, (inv_scale, inv) = guarded_statistics(
                fine,
                x,
                lambda: (tf.ones_like(inv_rms), inv_rms),
                lambda: _scaled_statistics(in_statistics_dtype(x), reduce, epsilon),
                output,
            )

            def saved():
                return in_statistics_dtype(kept) * inv_scale * inv, inv * inv_scale

        else:
            wide = in_statistics_dtype(x)

            def careful_x_hat():
                inv_scale, inv = _scaled_statistics(wide, reduce, epsilon)
                return wide * inv_scale * inv, inv * inv_scale

            y, saved = guarded(
                fine,
                lambda: (wide * inv_rms, inv_rms),
                careful_x_hat,
                reduce,
                gamma,
                beta,
            )
            y = tf.cast(y, output_dtype)

        def backward(dy):
            x_hat, inv = saved()
            g, param_grads = reduce.affine_grad(
                tf.cast(dy, x_hat.dtype), x_hat, gamma, beta
            )
            dx = reduce.scaled_grad(g, x_hat, inv)
            return [tf.cast(dx, x.dtype)] + param_grads

        return y, backward

    return _forward(x, *params)


def partial_rms_norm(x, gamma, beta, axis, partial_size, epsilon):
    """RMSNorm whose RMS is estimated from the first `partial_size` features.

    Only a slice of `x` feeds the statistic, so the closed-form gradient of
    `rms_norm` does not apply; autodiff is exact and cheap enough here.
    """
    begin = [0] * x.shape.rank
    size = [-1] * x.shape.rank
    size[axis] = partial_size
    head = tf.slice(x, begin, size)
    inv_rms = tf.math.rsqrt(
        tf.reduce_mean(tf.square(head), [axis], keepdims=True) + epsilon
    )
    return Reductions(x.shape.rank, [axis]).affine(x * inv_rms, gamma, beta)

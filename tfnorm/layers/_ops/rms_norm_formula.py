"""RMSNorm: the formula, its careful path and its analytic backward pass,
and partial RMSNorm.

Autodiff of the forward graph materialises several full-size
intermediates, while the closed form here needs one pass over `dy` and the
saved `x_hat`.
"""

from __future__ import annotations

from tfnorm._keras import tf
from tfnorm.layers._ops.guarded import guarded, row_scale
from tfnorm.layers._ops.primitives import Reductions
from tfnorm.layers._ops.routes import normalize


def rms_norm(x, gamma, beta, axes, epsilon):
    """y = x * rsqrt(mean(x^2) + epsilon) * gamma + beta over `axes`."""
    return normalize(_rms_norm_kernel, x, gamma, beta, axes, epsilon)


def _careful_rms_norm(x, reduce, epsilon):
    """(x_hat, inv_rms) for rows whose squares overflow float32 (|x| >=
    ~1e19, all-zero outputs otherwise): divided by their largest magnitude
    first, epsilon scaled to match."""
    scale = tf.stop_gradient(row_scale(reduce, x))
    scaled = x / scale
    inv = tf.math.rsqrt(reduce.mean_square(scaled) + epsilon / tf.square(scale))
    return scaled * inv, inv / scale


def _rms_norm_kernel(x, gamma, beta, reduce, epsilon):
    params = [p for p in (gamma, beta) if p is not None]

    @tf.custom_gradient
    def _forward(x, *params):
        inv_rms = tf.math.rsqrt(reduce.mean_square(x) + epsilon)
        # 1 / rms is 0 where the squares overflowed.
        fine = tf.reduce_all(inv_rms > 0)

        def fast_x_hat():
            return x * inv_rms, inv_rms

        def careful_x_hat():
            return _careful_rms_norm(x, reduce, epsilon)

        y, saved = guarded(fine, fast_x_hat, careful_x_hat, reduce, gamma, beta)

        def backward(dy):
            x_hat, inv = saved()
            g, param_grads = reduce.affine_grad(dy, x_hat, gamma, beta)
            return [reduce.scaled_grad(g, x_hat, inv)] + param_grads

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

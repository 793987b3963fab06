"""LayerNorm: the formula, its careful path and its analytic backward pass.

Autodiff of the forward graph materialises several full-size
intermediates, while the closed form here needs one pass over `dy` and the
saved `x_hat`.
"""

from __future__ import annotations

from tfnorm._keras import tf
from tfnorm.layers._ops.guarded import guarded, row_scale
from tfnorm.layers._ops.routes import normalize

#: A row whose mean exceeds this many standard deviations is normalised
#: through the careful path. A float32 row mean is off by up to ~2e-7 of the
#: mean (measured for 16 to 16384 features), and that error lands in every
#: output divided by the standard deviation: below this ratio it stays under
#: ~2e-6, well inside float32 LayerNorm's 1e-5 tolerance.
_MEAN_TO_STD_LIMIT = 8.0


def layer_norm(x, gamma, beta, axes, epsilon):
    """y = (x - mean) * rsqrt(var + epsilon) * gamma + beta over `axes`."""
    return normalize(_layer_norm_kernel, x, gamma, beta, axes, epsilon)


def _careful_layer_norm(x, reduce, epsilon):
    """(x_hat, inv_std) for rows the fast statistics cannot serve."""
    # Shift by one sample per row: the shifted values are small next to
    # their spread, so their float32 mean is exact to float32 resolution (a
    # plain float32 mean of values ~1e4 is off by ~1e-3, in every output).
    # Then divide by the row's largest magnitude so the squares stay finite
    # (|x| >= ~1e19 overflows float32 otherwise), epsilon scaled to match.
    # Shift and scale cancel mathematically: the backward pass is unchanged.
    shifted = x - tf.stop_gradient(reduce.first_sample(x))
    scale = tf.stop_gradient(row_scale(reduce, shifted))
    shifted = shifted / scale
    centred = shifted - reduce.mean(shifted)
    inv = tf.math.rsqrt(reduce.mean(tf.square(centred)) + epsilon / tf.square(scale))
    return centred * inv, inv / scale


def _layer_norm_kernel(x, gamma, beta, reduce, epsilon):
    params = [p for p in (gamma, beta) if p is not None]

    @tf.custom_gradient
    def _forward(x, *params):
        # Where elementwise ops fuse (XLA) the shift of `_careful_layer_norm`
        # costs nothing and is always made; elsewhere rows far from zero
        # next to their spread are sent to the careful path instead.
        shift = tf.stop_gradient(reduce.first_sample(x)) if reduce.fuses else None
        base = x if shift is None else x - shift
        mean = reduce.mean(base)
        centred = base - mean
        inv_std = tf.math.rsqrt(reduce.mean_square(centred) + epsilon)
        # 1 / std is 0 where the squares overflowed; NaN compares False.
        fine = inv_std > 0
        if not reduce.fuses:
            fine &= tf.abs(mean) * inv_std <= _MEAN_TO_STD_LIMIT
        fine = tf.reduce_all(fine)

        def fast_x_hat():
            # Under XLA recomputed from x here, so it fuses with its users
            # instead of being written out.
            rows = centred if shift is None else (x - shift) - mean
            return rows * inv_std, inv_std

        def careful_x_hat():
            return _careful_layer_norm(x, reduce, epsilon)

        y, saved = guarded(fine, fast_x_hat, careful_x_hat, reduce, gamma, beta)

        def backward(dy):
            x_hat, inv = saved()
            g, param_grads = reduce.affine_grad(dy, x_hat, gamma, beta)
            return [reduce.centred_grad(g, x_hat, inv)] + param_grads

        return y, backward

    return _forward(x, *params)

"""The normalisation formulas as plain TensorFlow functions.

Layers delegate their math here so tests can call the formulas directly.
Inputs are already in the statistics dtype (float32, or float64 when asked);
`axes` are positive and sorted; `gamma`/`beta` are None or broadcastable to
`x`.

LayerNorm and RMSNorm carry an analytic backward pass. Autodiff of the
forward graph recomputes and materialises several full-size intermediates;
the closed forms below need one pass over `dy` and the saved `x_hat`, which
is what makes forward+backward faster than Keras's built-in layer (see
docs/benchmarks.md).
"""

from __future__ import annotations

from tfnorm._keras import tf


def _other_axes(rank, axes):
    return [i for i in range(rank) if i not in axes]


def _param_grads(dy, x_hat, gamma, beta, rank, axes):
    """d(gamma), d(beta) reduced to their broadcast shapes."""
    other = _other_axes(rank, axes)
    grads = []
    if gamma is not None:
        grads.append(_sum_to(dy * x_hat, gamma, other))
    if beta is not None:
        grads.append(_sum_to(dy, beta, other))
    return grads


def _sum_to(value, param, other_axes):
    # `param` has the full rank of `value` with size 1 on `other_axes`.
    if not other_axes:
        return value
    return tf.reduce_sum(value, other_axes, keepdims=True)


def _first_sample(x, axes):
    """x at index 0 of every normalised axis, with size-1 dims kept."""
    size = [-1] * x.shape.rank
    for a in axes:
        size[a] = 1
    return tf.slice(x, [0] * x.shape.rank, size)


def _affine(x_hat, gamma, beta):
    y = x_hat
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


def layer_norm(x, gamma, beta, axes, epsilon):
    """y = (x - mean) * rsqrt(var + epsilon) * gamma + beta over `axes`."""
    rank = x.shape.rank
    axes = list(axes)
    params = [p for p in (gamma, beta) if p is not None]

    @tf.custom_gradient
    def _forward(x, *params):
        # Shift by one sample per row before averaging: for inputs far from
        # zero (|x| ~ 1e4) a float32 mean is only good to ~1e-3, and that
        # error would land in every output; the shifted values are small, so
        # their mean is exact to float32 resolution. The shift cancels
        # mathematically, so the backward pass below is unchanged.
        shift = tf.stop_gradient(_first_sample(x, axes))
        shifted = x - shift
        centred = shifted - tf.reduce_mean(shifted, axes, keepdims=True)
        # Two-pass variance: E[x^2] - E[x]^2 cancels for inputs far from 0.
        variance = tf.reduce_mean(tf.square(centred), axes, keepdims=True)
        inv_std = tf.math.rsqrt(variance + epsilon)
        x_hat = centred * inv_std

        def backward(dy):
            g = dy * gamma if gamma is not None else dy
            mean_g = tf.reduce_mean(g, axes, keepdims=True)
            mean_gx = tf.reduce_mean(g * x_hat, axes, keepdims=True)
            dx = inv_std * (g - mean_g - x_hat * mean_gx)
            return [dx] + _param_grads(dy, x_hat, gamma, beta, rank, axes)

        return _affine(x_hat, gamma, beta), backward

    return _forward(x, *params)


def rms_norm(x, gamma, beta, axes, epsilon):
    """y = x * rsqrt(mean(x^2) + epsilon) * gamma + beta over `axes`."""
    rank = x.shape.rank
    axes = list(axes)
    params = [p for p in (gamma, beta) if p is not None]

    @tf.custom_gradient
    def _forward(x, *params):
        inv_rms = tf.math.rsqrt(
            tf.reduce_mean(tf.square(x), axes, keepdims=True) + epsilon
        )
        x_hat = x * inv_rms

        def backward(dy):
            g = dy * gamma if gamma is not None else dy
            mean_gx = tf.reduce_mean(g * x_hat, axes, keepdims=True)
            dx = inv_rms * (g - x_hat * mean_gx)
            return [dx] + _param_grads(dy, x_hat, gamma, beta, rank, axes)

        return _affine(x_hat, gamma, beta), backward

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
    return _affine(x * inv_rms, gamma, beta)


def scale_norm(x, scale, axes, epsilon):
    """y = scale * x / max(||x||_2, epsilon) over `axes`."""
    # max(||x||, eps) as rsqrt(max(||x||^2, eps^2)): the gradient of sqrt at
    # an all-zero row (padding) would be 0 * inf = NaN.
    squared_norm = tf.reduce_sum(tf.square(x), axes, keepdims=True)
    return x * (scale * tf.math.rsqrt(tf.maximum(squared_norm, epsilon * epsilon)))

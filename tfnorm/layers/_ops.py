"""The normalisation formulas as plain TensorFlow functions.

Layers delegate their math here so tests can call the formulas directly.
Inputs are already in the statistics dtype (float32, or float64 when asked);
`axes` are positive and sorted; `gamma`/`beta` are None or have the rank of
`x` with size 1 outside `axes`.

LayerNorm and RMSNorm carry an analytic backward pass: autodiff of the
forward graph materialises several full-size intermediates, while the closed
forms below need one pass over `dy` and the saved `x_hat`.

When the normalised axes are the trailing ones (the usual case), the input is
viewed as a [rows, features] matrix. On CPU its per-row means and the
per-feature parameter gradients are then matrix-vector products: Eigen's and
XLA's matvec kernels are vectorised and multi-threaded where reductions
(especially column reductions under XLA) are not, which is most of the
speed-up measured in docs/benchmarks.md. On GPU, where float32 matmuls may run
in TF32 (10-bit mantissa), plain reductions are used instead.
"""

from __future__ import annotations

import math

from tfnorm._keras import tf

_MATVEC_REDUCTIONS = None


def _use_matvec():
    global _MATVEC_REDUCTIONS
    if _MATVEC_REDUCTIONS is None:
        _MATVEC_REDUCTIONS = not tf.config.list_physical_devices("GPU")
    return _MATVEC_REDUCTIONS


class _Reductions:
    """Means over the normalised axes and sums over the others."""

    def __init__(self, rank, axes):
        self.axes = list(axes)
        self.other = [i for i in range(rank) if i not in axes]

    def mean(self, t):
        return tf.reduce_mean(t, self.axes, keepdims=True)

    def param_sum(self, t):
        # Parameters have size 1 on the other axes.
        if not self.other:
            return t
        return tf.reduce_sum(t, self.other, keepdims=True)

    def first_sample(self, x):
        """x at index 0 of every normalised axis, with size-1 dims kept."""
        size = [-1] * x.shape.rank
        for a in self.axes:
            size[a] = 1
        return tf.slice(x, [0] * x.shape.rank, size)


class _MatvecReductions(_Reductions):
    """The same on a [rows, features] matrix, as matrix-vector products."""

    def __init__(self, features, dtype):
        super().__init__(2, [1])
        self.weights = tf.fill([features], tf.constant(1.0 / features, dtype))

    def mean(self, t):
        return tf.linalg.matvec(t, self.weights)[:, None]

    def param_sum(self, t):
        ones = tf.ones(tf.shape(t)[:1], t.dtype)
        return tf.linalg.matvec(t, ones, transpose_a=True)[None, :]


def _rows_view(x, gamma, beta, axes, rank):
    """(x, gamma, beta, reductions, restore) on a [rows, features] view when
    `axes` are the trailing axes and matvec reductions apply; else None."""
    if not _use_matvec() or list(axes) != list(range(rank - len(axes), rank)):
        return None
    features = math.prod(x.shape[a] for a in axes) if axes else 1
    shape = tf.shape(x)

    def flat(t):
        return None if t is None else tf.reshape(t, [-1, features])

    def restore(t):
        return tf.reshape(t, shape)

    reductions = _MatvecReductions(features, x.dtype)
    return flat(x), flat(gamma), flat(beta), reductions, restore


def _affine(x_hat, gamma, beta):
    y = x_hat
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


def _param_grads(dy, x_hat, gamma, beta, reductions):
    grads = []
    if gamma is not None:
        grads.append(reductions.param_sum(dy * x_hat))
    if beta is not None:
        grads.append(reductions.param_sum(dy))
    return grads


def _normalize(kernel, x, gamma, beta, axes, epsilon):
    rank = x.shape.rank
    view = _rows_view(x, gamma, beta, axes, rank)
    if view is None:
        return kernel(x, gamma, beta, _Reductions(rank, axes), epsilon)
    x2, gamma2, beta2, reductions, restore = view
    return restore(kernel(x2, gamma2, beta2, reductions, epsilon))


def layer_norm(x, gamma, beta, axes, epsilon):
    """y = (x - mean) * rsqrt(var + epsilon) * gamma + beta over `axes`."""
    return _normalize(_layer_norm_kernel, x, gamma, beta, axes, epsilon)


def rms_norm(x, gamma, beta, axes, epsilon):
    """y = x * rsqrt(mean(x^2) + epsilon) * gamma + beta over `axes`."""
    return _normalize(_rms_norm_kernel, x, gamma, beta, axes, epsilon)


def _layer_norm_kernel(x, gamma, beta, reduce, epsilon):
    params = [p for p in (gamma, beta) if p is not None]

    @tf.custom_gradient
    def _forward(x, *params):
        # Shift by one sample per row before averaging: for inputs far from
        # zero (|x| ~ 1e4) a float32 mean is only good to ~1e-3, and that
        # error would land in every output; the shifted values are small, so
        # their mean is exact to float32 resolution. The shift cancels
        # mathematically, so the backward pass below is unchanged.
        shifted = x - tf.stop_gradient(reduce.first_sample(x))
        mean = reduce.mean(shifted)
        # Two-pass variance: E[x^2] - E[x]^2 cancels for inputs far from 0.
        variance = reduce.mean(tf.math.squared_difference(shifted, mean))
        inv_std = tf.math.rsqrt(variance + epsilon)
        x_hat = (shifted - mean) * inv_std

        def backward(dy):
            g = dy * gamma if gamma is not None else dy
            mean_g = reduce.mean(g)
            mean_gx = reduce.mean(g * x_hat)
            dx = inv_std * (g - mean_g - x_hat * mean_gx)
            return [dx] + _param_grads(dy, x_hat, gamma, beta, reduce)

        return _affine(x_hat, gamma, beta), backward

    return _forward(x, *params)


def _rms_norm_kernel(x, gamma, beta, reduce, epsilon):
    params = [p for p in (gamma, beta) if p is not None]

    @tf.custom_gradient
    def _forward(x, *params):
        inv_rms = tf.math.rsqrt(reduce.mean(tf.square(x)) + epsilon)
        x_hat = x * inv_rms

        def backward(dy):
            g = dy * gamma if gamma is not None else dy
            dx = inv_rms * (g - x_hat * reduce.mean(g * x_hat))
            return [dx] + _param_grads(dy, x_hat, gamma, beta, reduce)

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

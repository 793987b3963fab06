"""The normalisation formulas as plain TensorFlow functions.

Layers delegate their math here so tests can call the formulas directly.
Inputs are already in the statistics dtype (float32, or float64 when asked);
`axes` are positive and sorted; `gamma`/`beta` are None or have the rank of
`x` with size 1 outside `axes`.

LayerNorm and RMSNorm carry an analytic backward pass: autodiff of the
forward graph materialises several full-size intermediates, while the closed
forms below need one pass over `dy` and the saved `x_hat`.

How the passes over memory are spent depends on where the formula runs, so
each formula is written once against a few primitives (row means and mean
squares, the per-feature affine and its gradient) and one implementation of
them is picked per call (`_primitives`):

* CPU, float32, trailing axes (the usual case), `_FusedRows`: in graph mode
  every elementwise op is its own kernel and its own pass over memory, so
  the fewest kernels win. Row means are TensorFlow's row reductions, mean
  squares come from `reduce_euclidean_norm` (the squares are summed without
  being written out), and the per-feature affine `x_hat * gamma + beta` and
  its gradient (`dy * gamma` with the sums of `dy * x_hat` and `dy`) run as
  one `FusedBatchNormV3` / `FusedBatchNormGradV3` kernel each, in inference
  mode on an NHWC view with the features as channels, mean 0, variance 1 and
  epsilon 0: exactly the affine and its closed-form gradient, with tfnorm's
  own statistics. (Keras 2.9's built-in LayerNormalization runs the fused
  kernel's training mode on the rows instead, whose float32 mean is a running
  sum.) Under TensorFlow 2.9's XLA the same ops lower to fusible code.
* CPU, float64, or float32 under XLA where `XLA_PREFERS_MATVEC` (trailing
  axes), `_MatvecReductions`: a [rows, features] view whose row means and
  parameter sums are matrix-vector products, which newer XLA runs
  vectorised and multi-threaded where its column reductions are slow.
* GPU (float32 matmuls may run in TF32 there) and other axes: plain
  reductions.

Statistics are float32 and two-pass. In graph mode the mean is not shifted
first (that costs a pass): rows whose mean is large next to their spread,
or whose squares overflow float32, are redone by a careful path chosen with
`tf.cond` (`_careful_layer_norm`, `_careful_rms_norm`).
"""

from __future__ import annotations

import math

from tfnorm._keras import XLA_PREFERS_MATVEC, in_xla_context, tf

_MATVEC_REDUCTIONS = None

#: Route override for tests: None (pick per call), "fused" (float32 only),
#: "matvec" or "reduce".
_ROUTE = None

#: A row whose mean exceeds this many standard deviations is normalised
#: through the careful path. A float32 row mean is off by up to ~2e-7 of the
#: mean (measured for 16 to 16384 features), and that error lands in every
#: output divided by the standard deviation: below this ratio it stays under
#: ~2e-6, well inside float32 LayerNorm's 1e-5 tolerance.
_MEAN_TO_STD_LIMIT = 8.0


def _use_matvec():
    global _MATVEC_REDUCTIONS
    if _MATVEC_REDUCTIONS is None:
        _MATVEC_REDUCTIONS = not tf.config.list_physical_devices("GPU")
    return _MATVEC_REDUCTIONS


class _Reductions:
    """The primitives on any axes, with plain reductions and elementwise ops."""

    def __init__(self, rank, axes):
        # Whether elementwise ops fuse with their users (under XLA).
        self.fuses = in_xla_context()
        self.axes = list(axes)
        self.other = [i for i in range(rank) if i not in axes]

    def mean(self, t):
        return tf.reduce_mean(t, self.axes, keepdims=True)

    def mean_square(self, t):
        return self.mean(tf.square(t))

    def max_abs(self, t):
        return tf.reduce_max(tf.abs(t), self.axes, keepdims=True)

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

    def affine(self, x_hat, gamma, beta):
        y = x_hat
        if gamma is not None:
            y = y * gamma
        if beta is not None:
            y = y + beta
        return y

    def affine_grad(self, dy, x_hat, gamma, beta):
        """(dy * gamma, [d gamma] [d beta]) for the params that are on."""
        grads = []
        if gamma is not None:
            grads.append(self.param_sum(dy * x_hat))
        if beta is not None:
            grads.append(self.param_sum(dy))
        return (dy if gamma is None else dy * gamma), grads

    def centred_grad(self, g, x_hat, inv_std):
        """LayerNorm's input gradient from g = dy * gamma."""
        mean_g = self.mean(g)
        mean_gx = self.mean(g * x_hat)
        return inv_std * (g - mean_g - x_hat * mean_gx)

    def scaled_grad(self, g, x_hat, inv_rms):
        """RMSNorm's input gradient from g = dy * gamma."""
        return inv_rms * (g - x_hat * self.mean(g * x_hat))


class _MatvecReductions(_Reductions):
    """The primitives on a [rows, features] matrix, reducing with
    matrix-vector products."""

    def __init__(self, features, dtype):
        super().__init__(2, [1])
        self.weights = tf.fill([features], tf.constant(1.0 / features, dtype))

    def mean(self, t):
        return tf.linalg.matvec(t, self.weights)[:, None]

    def param_sum(self, t):
        ones = tf.ones(tf.shape(t)[:1], t.dtype)
        return tf.linalg.matvec(t, ones, transpose_a=True)[None, :]


class _FusedRows(_Reductions):
    """The primitives on a float32 [rows, features] matrix in as few kernels
    as graph mode allows (see the module docstring)."""

    def __init__(self, features):
        super().__init__(2, [1])
        self.features = features

    def mean_square(self, t):
        if in_xla_context():  # XLA has no EuclideanNorm kernel
            return super().mean_square(t)
        return tf.square(tf.math.reduce_euclidean_norm(t, 1, keepdims=True)) / (
            self.features
        )

    def _per_feature(self, param, fill):
        if param is None:
            return tf.fill([self.features], fill)
        return tf.reshape(param, [self.features])

    def affine(self, x_hat, gamma, beta):
        if gamma is None or beta is None:  # one elementwise op anyway
            return super().affine(x_hat, gamma, beta)
        # Viewed as NHWC with the features as channels; with mean 0 and
        # variance 1 the inference-mode kernel is x_hat * gamma + beta.
        y = tf.raw_ops.FusedBatchNormV3(
            x=tf.reshape(x_hat, [1, -1, 1, self.features]),
            scale=self._per_feature(gamma, 1.0),
            offset=self._per_feature(beta, 0.0),
            mean=tf.zeros([self.features]),
            variance=tf.ones([self.features]),
            epsilon=0.0,
            data_format="NHWC",
            is_training=False,
        )[0]
        return tf.reshape(y, tf.shape(x_hat))

    def affine_grad(self, dy, x_hat, gamma, beta):
        if gamma is None:
            return super().affine_grad(dy, x_hat, gamma, beta)
        # The same view's inference-mode gradient: dy * gamma, the sum of
        # dy * x_hat and the sum of dy per feature, in one pass.
        view = [1, -1, 1, self.features]
        g, d_gamma, d_beta = tf.raw_ops.FusedBatchNormGradV3(
            y_backprop=tf.reshape(dy, view),
            x=tf.reshape(x_hat, view),
            scale=self._per_feature(gamma, 1.0),
            reserve_space_1=tf.zeros([self.features]),
            reserve_space_2=tf.ones([self.features]),
            reserve_space_3=tf.zeros([0]),
            epsilon=0.0,
            data_format="NHWC",
            is_training=False,
        )[:3]
        grads = [d_gamma[None, :]] + ([d_beta[None, :]] if beta is not None else [])
        return tf.reshape(g, tf.shape(dy)), grads


def _trailing(axes, rank):
    return list(axes) == list(range(rank - len(axes), rank))


def _route(x, axes, rank):
    if _ROUTE is not None:
        return _ROUTE
    if not _use_matvec() or not _trailing(axes, rank):
        return "reduce"
    if x.dtype == tf.float32 and not (XLA_PREFERS_MATVEC and in_xla_context()):
        return "fused"
    return "matvec"


def _primitives(x, gamma, beta, axes, rank):
    """(x, gamma, beta, primitives, restore): on a [rows, features] view
    when `axes` are trailing and the route allows, else as given."""
    route = _route(x, axes, rank)
    if route == "reduce" or not _trailing(axes, rank):
        return x, gamma, beta, _Reductions(rank, axes), lambda t: t
    features = math.prod(x.shape[a] for a in axes) if axes else 1
    shape = tf.shape(x)

    def flat(t):
        return None if t is None else tf.reshape(t, [-1, features])

    def restore(t):
        return tf.reshape(t, shape)

    if route == "fused":
        primitives = _FusedRows(features)
    else:
        primitives = _MatvecReductions(features, x.dtype)
    return flat(x), flat(gamma), flat(beta), primitives, restore


def _normalize(kernel, x, gamma, beta, axes, epsilon):
    rank = x.shape.rank
    x2, gamma2, beta2, primitives, restore = _primitives(x, gamma, beta, axes, rank)
    return restore(kernel(x2, gamma2, beta2, primitives, epsilon))


def layer_norm(x, gamma, beta, axes, epsilon):
    """y = (x - mean) * rsqrt(var + epsilon) * gamma + beta over `axes`."""
    return _normalize(_layer_norm_kernel, x, gamma, beta, axes, epsilon)


def rms_norm(x, gamma, beta, axes, epsilon):
    """y = x * rsqrt(mean(x^2) + epsilon) * gamma + beta over `axes`."""
    return _normalize(_rms_norm_kernel, x, gamma, beta, axes, epsilon)


def _row_scale(reduce, x):
    """Per-row max(|x|, 1): dividing by it keeps squares finite."""
    return tf.maximum(reduce.max_abs(x), tf.constant(1.0, x.dtype))


def _guarded(fine, fast_x_hat, careful_x_hat, reduce, gamma, beta):
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


def _careful_layer_norm(x, reduce, epsilon):
    """(x_hat, inv_std) for rows the fast statistics cannot serve."""
    # Shift by one sample per row: the shifted values are small next to
    # their spread, so their float32 mean is exact to float32 resolution (a
    # plain float32 mean of values ~1e4 is off by ~1e-3, in every output).
    # Then divide by the row's largest magnitude so the squares stay finite
    # (|x| >= ~1e19 overflows float32 otherwise), epsilon scaled to match.
    # Shift and scale cancel mathematically: the backward pass is unchanged.
    shifted = x - tf.stop_gradient(reduce.first_sample(x))
    scale = tf.stop_gradient(_row_scale(reduce, shifted))
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

        y, saved = _guarded(fine, fast_x_hat, careful_x_hat, reduce, gamma, beta)

        def backward(dy):
            x_hat, inv = saved()
            g, param_grads = reduce.affine_grad(dy, x_hat, gamma, beta)
            return [reduce.centred_grad(g, x_hat, inv)] + param_grads

        return y, backward

    return _forward(x, *params)


def _careful_rms_norm(x, reduce, epsilon):
    """(x_hat, inv_rms) for rows whose squares overflow float32 (|x| >=
    ~1e19, all-zero outputs otherwise): divided by their largest magnitude
    first, epsilon scaled to match."""
    scale = tf.stop_gradient(_row_scale(reduce, x))
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

        y, saved = _guarded(fine, fast_x_hat, careful_x_hat, reduce, gamma, beta)

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
    return _Reductions(x.shape.rank, [axis]).affine(x * inv_rms, gamma, beta)


def scale_norm(x, scale, axes, epsilon):
    """y = scale * x / max(||x||_2, epsilon) over `axes`."""
    # max(||x||, eps) as rsqrt(max(||x||^2, eps^2)): the gradient of sqrt at
    # an all-zero row (padding) would be 0 * inf = NaN.
    squared_norm = tf.reduce_sum(tf.square(x), axes, keepdims=True)

    def careful():
        # |x| >= ~1e19 overflows the sum of squares: divide by the row's
        # largest magnitude first (the result is unchanged).
        row_scale = tf.stop_gradient(_row_scale(_Reductions(x.shape.rank, axes), x))
        scaled = x / row_scale
        norm = tf.reduce_sum(tf.square(scaled), axes, keepdims=True)
        floor = tf.square(epsilon / row_scale)
        return scaled * (scale * tf.math.rsqrt(tf.maximum(norm, floor)))

    def plain():
        return x * (scale * tf.math.rsqrt(tf.maximum(squared_norm, epsilon * epsilon)))

    return tf.cond(tf.reduce_all(tf.math.is_finite(squared_norm)), plain, careful)

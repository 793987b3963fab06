"""The primitives the formulas are written against: row means and mean
squares, the per-feature affine and its gradient, in three implementations.

Which one serves a call is decided in `routes`; this module holds how each
spends its passes over memory:

* `Reductions`, on any axes: plain reductions and elementwise ops.
* `FusedRows`, a float32 [rows, features] view in graph mode on CPU, where
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
  sum.) Under XLA the same ops lower to reductions that fuse with the ops
  around them.
* `MatvecReductions`, a [rows, features] view whose row means and parameter
  sums are matrix-vector products (float64, where TensorFlow has no fused
  kernels).
"""

from __future__ import annotations

from tfnorm._keras import in_xla_context, tf


class Reductions:
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


class MatvecReductions(Reductions):
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


class FusedRows(Reductions):
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

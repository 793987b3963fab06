from __future__ import annotations

import math

from tfnorm._checks import is_real
from tfnorm._keras import register_serializable, tf
from tfnorm.layers import _ops
from tfnorm.layers.affine_normalization import AffineNormalization
from tfnorm.layers.arguments import in_statistics_dtype, validate_bool
from tfnorm.layers.registry import register_norm


@register_norm("rms")
@register_serializable
class RMSNorm(AffineNormalization):
    """Root-mean-square normalization (Zhang and Sennrich, 2019).

    Rescales each example by the root mean square of its features over
    `axis`, without centring: cheaper than LayerNormalization and the norm of
    T5, LLaMA and Gemma. With `zero_centered_gamma=True` the stored weight is
    an offset `s` and the scale is `1 + s` (Gemma's convention, so weight
    decay pulls the scale toward 1, not 0). With `partial=p` the RMS is
    estimated from the first `ceil(p * d)` features only (pRMSNorm). Outputs
    match `keras.layers.RMSNormalization` (Keras >= 3.9) for the same
    `epsilon`; unlike it, this layer keeps Keras masks and keeps `gamma` in
    float32 under mixed precision.

    Reference: [Zhang and Sennrich, 2019. Root Mean Square Layer
    Normalization](https://arxiv.org/abs/1910.07467).

    ```
    rms = sqrt(mean(x[..., :k] ** 2, axis) + epsilon)   # k = d unless partial
    y = x / rms * gamma + beta                           # beta if center=True
    gamma = 1 + s if zero_centered_gamma else s
    ```

    Example:

    >>> import numpy as np, tfnorm
    >>> layer = tfnorm.RMSNorm()
    >>> y = layer(np.array([[3.0, 4.0]], "float32"))
    >>> [round(float(v), 3) for v in y[0]]
    [0.849, 1.131]

    Args:
        axis: int or list of ints, the axes to normalise over. Defaults to
            `-1`.
        epsilon: float added to the mean square, in about [1.2e-38, 3.4e38]
            (a normal float32 number: the statistics are float32). Defaults
            to `1e-6` (T5, LLaMA and Keras's RMSNormalization).
        scale: bool. Multiply by the learned scale. Defaults to `True`.
        center: bool. Add a learned offset `beta`. Defaults to `False`.
        zero_centered_gamma: bool. Store `s` and scale by `1 + s`. With the
            default `gamma_initializer` this starts at `s = 0`. Defaults to
            `False`.
        partial: float in (0, 1] or None. Estimate the RMS from the first
            `ceil(partial * d)` features of the (single) normalised axis.
            Defaults to `None` (all features).
        gamma_initializer, beta_initializer: initializers. Default to
            `"ones"` (`"zeros"` when `zero_centered_gamma=True`) and
            `"zeros"`.
        gamma_regularizer, beta_regularizer, gamma_constraint,
            beta_constraint: optional regularizers and constraints.
        weight_layout: `"keras"` or `"axis_order"`, as in
            `tfnorm.LayerNormalization`. Defaults to `"keras"`.
        **kwargs: base layer arguments (`name`, `dtype`, `trainable`).

    Call arguments:
        inputs: a floating-point tensor of any rank >= 1.

    Returns:
        A tensor of the same shape, in the layer's compute dtype.
    """

    row_statistic_name = "mean_square"

    def __init__(
        self,
        axis=-1,
        epsilon=1e-6,
        scale=True,
        center=False,
        zero_centered_gamma=False,
        partial=None,
        gamma_initializer=None,
        beta_initializer="zeros",
        **kwargs,
    ):
        if gamma_initializer is None:
            gamma_initializer = "zeros" if zero_centered_gamma else "ones"
        super().__init__(
            axis=axis,
            epsilon=epsilon,
            center=center,
            scale=scale,
            gamma_initializer=gamma_initializer,
            beta_initializer=beta_initializer,
            **kwargs,
        )
        if partial is not None and (not is_real(partial) or not 0.0 < partial <= 1.0):
            raise ValueError(
                f"`partial` must be a float in (0, 1] or None. Received: partial={partial!r}"
            )
        self.zero_centered_gamma = validate_bool(
            "zero_centered_gamma", zero_centered_gamma
        )
        self.partial = None if partial is None else float(partial)

    def build(self, input_shape):
        super().build(input_shape)
        self._partial_size = None
        if self.partial is not None and self.partial < 1.0:
            if len(self._axis_sizes) != 1:
                raise ValueError(
                    "`partial` estimates the RMS from the leading features of "
                    "one axis; it cannot be used with several axes. Received: "
                    f"axis={self.axis!r}, partial={self.partial!r}"
                )
            self._partial_size = self._partial_features(self._axis_sizes[0])

    def _partial_features(self, size):
        """How many leading features of `size` estimate the RMS."""
        return max(1, int(math.ceil(self.partial * size)))

    def _normalize(self, inputs, positive):
        gamma, beta = self._gamma_beta(inputs, positive)
        if gamma is not None and self.zero_centered_gamma:
            gamma = 1.0 + gamma
        if self._partial_size is not None:
            return _ops.partial_rms_norm(
                in_statistics_dtype(inputs),
                gamma,
                beta,
                positive[0],
                self._partial_size,
                self.epsilon,
            )
        return _ops.rms_norm(
            inputs, gamma, beta, sorted(positive), self.epsilon, self.compute_dtype
        )

    def _row_statistic(self, x, axes):
        if self.partial is not None and self.partial < 1.0:
            (axis,) = axes  # `build` allows `partial` with one axis only.
            begin = [0] * x.shape.rank
            size = [-1] * x.shape.rank
            size[axis] = self._partial_features(x.shape[axis])
            x = tf.slice(x, begin, size)
        return tf.reduce_mean(tf.square(x), axis=axes)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "zero_centered_gamma": self.zero_centered_gamma,
                "partial": self.partial,
            }
        )
        return config

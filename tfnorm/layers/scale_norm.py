from __future__ import annotations

import math

from tfnorm._keras import keras, register_serializable, tf
from tfnorm.layers import _ops
from tfnorm.layers.arguments import FLOAT32_NORMAL_RANGE, statistics_dtype
from tfnorm.layers.base_normalization import BaseNormalization
from tfnorm.layers.registry import register_norm


@register_norm("scale")
@register_serializable
class ScaleNorm(BaseNormalization):
    """ScaleNorm (Nguyen and Salazar, 2019): l2-normalise, one learned scale.

    Projects each example onto the sphere of radius `g` over `axis`, with a
    single learned scalar `g` shared by all features. It has one parameter
    instead of 2d, and the paper reports faster, more stable training of
    Pre-LN Transformers in low-resource translation.

    Reference: [Nguyen and Salazar, 2019. Transformers without Tears](
    https://arxiv.org/abs/1910.05895).

    ```
    y = g * x / max(||x||_2, epsilon)      # norm over `axis`; g is a scalar
    ```

    Example:

    >>> import numpy as np, tfnorm
    >>> layer = tfnorm.ScaleNorm()           # g starts at sqrt(d) = sqrt(2)
    >>> y = layer(np.array([[3.0, 4.0]], "float32"))
    >>> [round(float(v), 3) for v in y[0]]
    [0.849, 1.131]

    Args:
        axis: int or list of ints, the axes to normalise over. Defaults to
            `-1`.
        epsilon: float, the smallest norm divided by (an all-zero row
            stays zero instead of dividing by zero), in about [1.1e-19,
            1.8e19] (its square must be a normal float32 number). Defaults
            to `1e-5`.
        scale_initializer: initializer of `g`, or None for the paper's
            `sqrt(d)` with `d` the number of normalised features. Defaults to
            `None`.
        scale_regularizer, scale_constraint: optional regularizer and
            constraint of `g`.
        **kwargs: base layer arguments (`name`, `dtype`, `trainable`).

    Call arguments:
        inputs: a floating-point tensor of any rank >= 1.

    Returns:
        A tensor of the same shape, in the layer's compute dtype.
    """

    # One scalar `g`: a shared layer serves inputs of any size.
    _sized_weights = False

    # The formula compares ||x||^2 with epsilon^2, which float32 must hold
    # as a normal number too (else an all-zero row gives 0 * inf = NaN).
    _epsilon_range = tuple(math.sqrt(bound) for bound in FLOAT32_NORMAL_RANGE)

    row_statistic_name = "norm"

    def __init__(
        self,
        axis=-1,
        epsilon=1e-5,
        scale_initializer=None,
        scale_regularizer=None,
        scale_constraint=None,
        **kwargs,
    ):
        super().__init__(axis=axis, epsilon=epsilon, **kwargs)
        self.scale_initializer = (
            None
            if scale_initializer is None
            else keras.initializers.get(scale_initializer)
        )
        self.scale_regularizer = keras.regularizers.get(scale_regularizer)
        self.scale_constraint = keras.constraints.get(scale_constraint)

    def build(self, input_shape):
        super().build(input_shape)
        initializer = self.scale_initializer
        if initializer is None:
            features = 1
            for size in self._axis_sizes:
                features *= size
            initializer = keras.initializers.Constant(math.sqrt(features))
        self.g = self._add_param(
            "scale",
            initializer,
            self.scale_regularizer,
            self.scale_constraint,
            shape=(),
        )

    def _normalize(self, inputs, positive):
        scale = tf.cast(tf.convert_to_tensor(self.g), statistics_dtype(inputs.dtype))
        return _ops.scale_norm(
            inputs, scale, sorted(positive), self.epsilon, self.compute_dtype
        )

    def _row_statistic(self, x, axes):
        return tf.sqrt(tf.reduce_sum(tf.square(x), axis=axes))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "scale_initializer": None
                if self.scale_initializer is None
                else keras.initializers.serialize(self.scale_initializer),
                "scale_regularizer": keras.regularizers.serialize(
                    self.scale_regularizer
                ),
                "scale_constraint": keras.constraints.serialize(self.scale_constraint),
            }
        )
        return config

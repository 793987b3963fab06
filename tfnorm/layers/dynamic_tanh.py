from __future__ import annotations

from tfnorm._checks import is_real
from tfnorm._keras import keras, register_serializable, tf
from tfnorm.layers.affine_normalization import AffineNormalization
from tfnorm.layers.arguments import in_statistics_dtype
from tfnorm.layers.registry import register_norm


@register_norm("dyt")
@register_serializable
class DynamicTanh(AffineNormalization):
    """Dynamic Tanh, DyT (Zhu et al., 2025): a norm without statistics.

    Squashes each feature with `tanh(alpha * x)`, `alpha` one learned scalar,
    then applies the per-feature `gamma` and `beta` of LayerNormalization. It
    computes no mean or variance (so it takes no `epsilon`); the paper
    reports Transformers in which it replaces every LayerNorm training to the
    same quality. `tfnorm.get_norm("dyt")` and `norm="dyt"` choose it.

    Reference: [Zhu, Chen, He, LeCun and Liu, 2025. Transformers without
    Normalization](https://arxiv.org/abs/2503.10622).

    ```
    y = tanh(alpha * x) * gamma + beta     # alpha a scalar; gamma, beta over axis
    ```

    Example:

    >>> import numpy as np, tfnorm
    >>> layer = tfnorm.DynamicTanh(alpha_initializer=1.0)
    >>> y = layer(np.array([[0.0, 1.0]], "float32"))
    >>> [round(float(v), 3) for v in y[0]]
    [0.0, 0.762]

    Args:
        axis: int or list of ints, the axes `gamma` and `beta` span.
            Defaults to `-1`.
        alpha_initializer: initializer of `alpha`, or a number to start it
            at. Defaults to `0.5` (the paper's value outside large language
            models, which start lower).
        center: bool. Add the learned offset `beta`. Defaults to `True`.
        scale: bool. Multiply by the learned `gamma`. Defaults to `True`.
        gamma_initializer, beta_initializer: initializers. Default to
            `"ones"` and `"zeros"`.
        alpha_regularizer, gamma_regularizer, beta_regularizer,
            alpha_constraint, gamma_constraint, beta_constraint: optional
            regularizers and constraints.
        **kwargs: base layer arguments (`name`, `dtype`, `trainable`).

    Call arguments:
        inputs: a floating-point tensor of any rank >= 1.

    Returns:
        A tensor of the same shape, in the layer's compute dtype.
    """

    has_row_statistic = False

    def __init__(
        self,
        axis=-1,
        alpha_initializer=0.5,
        center=True,
        scale=True,
        alpha_regularizer=None,
        alpha_constraint=None,
        epsilon=None,
        **kwargs,
    ):
        # `epsilon` is taken only to refuse it with a clear message.
        super().__init__(
            axis=axis, epsilon=epsilon, center=center, scale=scale, **kwargs
        )
        self.alpha_initializer = _alpha_initializer(alpha_initializer)
        self.alpha_regularizer = keras.regularizers.get(alpha_regularizer)
        self.alpha_constraint = keras.constraints.get(alpha_constraint)

    def build(self, input_shape):
        super().build(input_shape)
        self.alpha = self._add_param(
            "alpha",
            self.alpha_initializer,
            self.alpha_regularizer,
            self.alpha_constraint,
            shape=(),
        )

    def _normalize(self, inputs, positive):
        x = in_statistics_dtype(inputs)
        gamma, beta = self._gamma_beta(x, positive)
        alpha = tf.cast(tf.convert_to_tensor(self.alpha), x.dtype)
        return dynamic_tanh(x, alpha, gamma, beta)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "alpha_initializer": keras.initializers.serialize(
                    self.alpha_initializer
                ),
                "alpha_regularizer": keras.regularizers.serialize(
                    self.alpha_regularizer
                ),
                "alpha_constraint": keras.constraints.serialize(self.alpha_constraint),
            }
        )
        return config


def _alpha_initializer(value):
    if is_real(value):
        return keras.initializers.Constant(float(value))
    problem = None
    if value is not None and not isinstance(value, bool):
        try:
            return keras.initializers.get(value)
        except (ValueError, TypeError) as error:
            problem = error
    raise ValueError(
        "`alpha_initializer` must be a number or a Keras initializer. "
        f"Received: alpha_initializer={value!r}" + (f" ({problem})" if problem else "")
    )


def dynamic_tanh(x, alpha, gamma, beta):
    """y = tanh(alpha * x) * gamma + beta (`gamma`/`beta` None when off)."""
    y = tf.tanh(alpha * x)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y

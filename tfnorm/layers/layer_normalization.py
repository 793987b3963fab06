from __future__ import annotations

from tfnorm._keras import register_serializable, tf
from tfnorm.layers import _ops
from tfnorm.layers.affine_normalization import AffineNormalization
from tfnorm.layers.registry import register_norm


def _check_rms_scaling(rms_scaling):
    if rms_scaling:
        raise ValueError(
            "tfnorm.LayerNormalization has no `rms_scaling` mode; use "
            "tfnorm.RMSNorm for root-mean-square normalisation. (Keras's "
            "deprecated `rms_scaling=True` divides by the standard deviation "
            "without centring, which is neither.) "
            f"Received: rms_scaling={rms_scaling!r}"
        )


# A norm picked by *name* is the Transformer setting: the original
# Transformer, PyTorch and keras-hub use epsilon 1e-5, and so do tfnorm's
# encoders and `tfnorm train`. The class keeps Keras's 1e-3: it is a drop-in
# for Keras's layer.
@register_norm("layer", epsilon=1e-5)
@register_serializable
class LayerNormalization(AffineNormalization):
    """Layer normalization (Ba et al., 2016), a drop-in for Keras's own.

    Normalises each example over `axis` to zero mean and unit variance, then
    applies a learned per-feature scale and offset. It takes the same
    arguments with the same defaults as `keras.layers.LayerNormalization`,
    names its weights `gamma` and `beta` with the same shapes (so
    `set_weights` moves weights between the two) and gives the same outputs.
    Beyond it, negative axes count from the end of each input (one layer
    serves inputs of several ranks; the saved `axis` is kept as given),
    statistics are computed in float32 from the input as given under mixed
    precision, Keras masks pass through, ragged inputs are normalised row by
    row, and the backward pass is written out analytically, which makes
    training steps faster than the built-in's.

    Reference: [Ba, Kiros and Hinton, 2016. Layer Normalization](
    https://arxiv.org/abs/1607.06450).

    ```
    mean = mean(x, axis)
    var = mean((x - mean) ** 2, axis)
    y = (x - mean) * rsqrt(var + epsilon) * gamma + beta
    ```

    Example:

    >>> import numpy as np, tfnorm
    >>> layer = tfnorm.LayerNormalization()
    >>> y = layer(np.array([[1.0, 2.0, 3.0]], "float32"))
    >>> [round(float(v), 3) for v in y[0]]
    [-1.224, 0.0, 1.224]

    Args:
        axis: int or list of ints. The axes to normalise over, usually the
            feature axis. Negative and non-contiguous axes are allowed.
            Defaults to `-1`.
        epsilon: float added to the variance, in about [1.2e-38, 3.4e38]
            (a normal float32 number: the statistics are float32). Defaults
            to `1e-3`, Keras's default, so that swapping the class leaves a
            model's outputs unchanged. Transformer code (the original
            implementations, PyTorch, keras-hub) uses `1e-5`, which
            `tfnorm.get_norm("layer")` and tfnorm's encoders pass; `1e-3`
            visibly damps low-variance features of pretrained Transformer
            weights.
        center: bool. Add the learned offset `beta`. Defaults to `True`.
        scale: bool. Multiply by the learned scale `gamma`. Defaults to
            `True`.
        beta_initializer, gamma_initializer: initializers for `beta` and
            `gamma`. Default to `"zeros"` and `"ones"`.
        beta_regularizer, gamma_regularizer: optional regularizers.
        beta_constraint, gamma_constraint: optional constraints.
        weight_layout: `"keras"` (Keras's layout) or `"axis_order"` (how
            tfnorm 0.1.0 laid out weights for an out-of-order `axis` list;
            set automatically when such a saved model is loaded). Defaults
            to `"keras"`.
        **kwargs: base layer arguments (`name`, `dtype`, `trainable`).
            Keras 3's `rms_scaling=False` is accepted and ignored;
            `rms_scaling=True` is an error pointing to `tfnorm.RMSNorm`.

    Call arguments:
        inputs: a floating-point tensor of any rank >= 1.

    Returns:
        A tensor of the same shape, in the layer's compute dtype.
    """

    row_statistic_name = "variance"

    def __init__(
        self,
        axis=-1,
        epsilon=1e-3,
        center=True,
        scale=True,
        beta_initializer="zeros",
        gamma_initializer="ones",
        beta_regularizer=None,
        gamma_regularizer=None,
        beta_constraint=None,
        gamma_constraint=None,
        **kwargs,
    ):
        # Keras 3 writes `rms_scaling` into every config; False is a no-op.
        _check_rms_scaling(kwargs.pop("rms_scaling", False))
        super().__init__(
            axis=axis,
            epsilon=epsilon,
            center=center,
            scale=scale,
            beta_initializer=beta_initializer,
            gamma_initializer=gamma_initializer,
            beta_regularizer=beta_regularizer,
            gamma_regularizer=gamma_regularizer,
            beta_constraint=beta_constraint,
            gamma_constraint=gamma_constraint,
            **kwargs,
        )

    @classmethod
    def from_config(cls, config):
        # Checked here too: Keras's `from_config` rewraps constructor errors.
        _check_rms_scaling(config.get("rms_scaling", False))
        return super().from_config(config)

    def _normalize(self, inputs, positive):
        gamma, beta = self._gamma_beta(inputs, positive)
        return _ops.layer_norm(
            inputs, gamma, beta, sorted(positive), self.epsilon, self.compute_dtype
        )

    def _row_statistic(self, x, axes):
        return tf.math.reduce_variance(x, axis=axes)

"""What every tfnorm normalisation layer shares."""

from __future__ import annotations

from tfnorm._checks import is_int, is_real
from tfnorm._keras import Layer, add_weight, keras, tf


def _validate_epsilon(epsilon):
    if not is_real(epsilon) or epsilon <= 0:
        raise ValueError(
            f"`epsilon` must be a positive finite number. Received: epsilon={epsilon!r}"
        )
    return float(epsilon)


def _validate_axis_type(axis):
    if isinstance(axis, (list, tuple)):
        values = list(axis)
    else:
        values = [axis]
    if not values or not all(is_int(a) for a in values):
        raise TypeError(
            "`axis` must be an int or a non-empty list of ints. "
            f"Received: axis={axis!r}"
        )
    # Stored as given (an int stays an int, negatives stay negative) so a
    # saved config is not tied to the rank of the input it was built on.
    return [int(a) for a in values] if isinstance(axis, (list, tuple)) else int(axis)


class BaseNormalization(Layer):
    """Base class of tfnorm's normalisation layers.

    Holds what all norms share: `axis` and `epsilon` validation, statistics
    in float32 under mixed precision (float64 inputs keep float64), weights
    created in the variable dtype without autocasting, mask pass-through and
    the common config. Subclasses create their weights in `build` after
    calling `super().build` and implement `_normalize(x)` on the statistics
    dtype.

    Args:
        axis: int or list of ints, the axes to normalise over. Negative
            values count from the end; axes need not be contiguous.
        epsilon: small positive float added for numerical stability.
        **kwargs: base layer keyword arguments (`name`, `dtype`, ...).
    """

    def __init__(self, axis=-1, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.axis = _validate_axis_type(axis)
        self.epsilon = _validate_epsilon(epsilon)
        self.supports_masking = True
        self._axes = None
        self._rank = None

    def build(self, input_shape):
        shape = tf.TensorShape(input_shape)
        if shape.rank is None:
            raise ValueError(
                f"{type(self).__name__} needs an input of known rank. "
                f"Received: input_shape={input_shape}"
            )
        rank = shape.rank
        given = self.axis if isinstance(self.axis, list) else [self.axis]
        positive = []
        for a in given:
            if not -rank <= a < rank:
                raise ValueError(
                    f"`axis` {a} is out of range for an input of rank {rank} "
                    f"(shape {shape}). Received: axis={self.axis!r}"
                )
            positive.append(a % rank)
        if len(set(positive)) != len(positive):
            raise ValueError(
                f"`axis` names the same dimension twice for an input of rank "
                f"{rank}. Received: axis={self.axis!r}"
            )
        for a in positive:
            if shape[a] is None:
                raise ValueError(
                    f"The size of every normalised axis must be known, but axis "
                    f"{a} of input shape {shape} is None. Received: axis={self.axis!r}"
                )
        self._rank = rank
        # Parameter dims follow the order of `axis`, as in Keras's own
        # LayerNormalization, so weights move between the two unchanged.
        self._param_axes = positive
        self._axes = tuple(sorted(positive))
        self._param_shape = tuple(shape[a] for a in positive)
        self._broadcast_shape = [1] * rank
        for a in positive:
            self._broadcast_shape[a] = shape[a]
        self.built = True

    def _add_param(self, name, initializer, regularizer, constraint, shape=None):
        # Not autocast: under a mixed policy γ/β stay float32, as do the
        # statistics they multiply.
        return add_weight(
            self,
            name=name,
            shape=self._param_shape if shape is None else shape,
            initializer=initializer,
            regularizer=regularizer,
            constraint=constraint,
            autocast=False,
        )

    def _broadcast_param(self, weight, dtype):
        value = tf.cast(tf.convert_to_tensor(weight), dtype)
        if self._param_axes != sorted(self._param_axes):
            order = sorted(
                range(len(self._param_axes)), key=self._param_axes.__getitem__
            )
            value = tf.transpose(value, order)
        return tf.reshape(value, self._broadcast_shape)

    def call(self, inputs):
        dtype = tf.as_dtype(inputs.dtype)
        if not dtype.is_floating:
            raise TypeError(
                f"{type(self).__name__} normalises floating-point inputs only. "
                f"Received: inputs.dtype={dtype.name}"
            )
        stats_dtype = tf.float64 if dtype == tf.float64 else tf.float32
        outputs = self._normalize(tf.cast(inputs, stats_dtype))
        return tf.cast(outputs, dtype)

    def _normalize(self, x):
        raise NotImplementedError

    def compute_output_shape(self, input_shape):
        return input_shape

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = super().get_config()
        config.update({"axis": self.axis, "epsilon": self.epsilon})
        return config


class AffineNormalization(BaseNormalization):
    """A normalisation followed by an optional learned `gamma` and `beta`.

    Shared by LayerNormalization and RMSNorm: both learn a per-feature scale
    `gamma` (shape: the input dims along `axis`) and, when `center=True`, an
    offset `beta`, configured exactly as Keras's own LayerNormalization.
    """

    def __init__(
        self,
        axis=-1,
        epsilon=1e-5,
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
        super().__init__(axis=axis, epsilon=epsilon, **kwargs)
        self.center = bool(center)
        self.scale = bool(scale)
        self.beta_initializer = keras.initializers.get(beta_initializer)
        self.gamma_initializer = keras.initializers.get(gamma_initializer)
        self.beta_regularizer = keras.regularizers.get(beta_regularizer)
        self.gamma_regularizer = keras.regularizers.get(gamma_regularizer)
        self.beta_constraint = keras.constraints.get(beta_constraint)
        self.gamma_constraint = keras.constraints.get(gamma_constraint)

    def build(self, input_shape):
        super().build(input_shape)
        self.gamma = None
        self.beta = None
        if self.scale:
            self.gamma = self._add_param(
                "gamma",
                self.gamma_initializer,
                self.gamma_regularizer,
                self.gamma_constraint,
            )
        if self.center:
            self.beta = self._add_param(
                "beta",
                self.beta_initializer,
                self.beta_regularizer,
                self.beta_constraint,
            )

    def _gamma_beta(self, dtype):
        """γ and β broadcast to the input rank in `dtype`, or None when off."""
        gamma = None if self.gamma is None else self._broadcast_param(self.gamma, dtype)
        beta = None if self.beta is None else self._broadcast_param(self.beta, dtype)
        return gamma, beta

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "center": self.center,
                "scale": self.scale,
                "beta_initializer": keras.initializers.serialize(self.beta_initializer),
                "gamma_initializer": keras.initializers.serialize(
                    self.gamma_initializer
                ),
                "beta_regularizer": keras.regularizers.serialize(self.beta_regularizer),
                "gamma_regularizer": keras.regularizers.serialize(
                    self.gamma_regularizer
                ),
                "beta_constraint": keras.constraints.serialize(self.beta_constraint),
                "gamma_constraint": keras.constraints.serialize(self.gamma_constraint),
            }
        )
        return config

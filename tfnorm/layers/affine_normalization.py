"""`AffineNormalization`: a norm followed by Keras's learned `gamma` and `beta`."""

from __future__ import annotations

import numpy as np

from tfnorm._keras import (
    keras,
    keras_weight_dims,
    portable_layer_config,
    tf,
)
from tfnorm.layers.arguments import (
    axis_entries,
    input_order,
    statistics_dtype,
    validate_bool,
)
from tfnorm.layers.base_normalization import BaseNormalization

_WEIGHT_LAYOUTS = ("keras", "axis_order")


class AffineNormalization(BaseNormalization):
    """A normalisation followed by an optional learned `gamma` and `beta`.

    Shared by LayerNormalization and RMSNorm: both learn a per-feature scale
    `gamma` (spanning the input dims named by `axis`) and, when
    `center=True`, an offset `beta`, configured exactly as Keras's own
    LayerNormalization.

    Weights are laid out as Keras's own norms lay them out in this runtime,
    so `set_weights` moves them between the two unchanged: their values
    follow the order of the input's dims whatever the order of `axis`. (For
    an `axis` list given out of order, Keras 3 sorts the weight's dims and
    Keras 2 keeps the order of `axis` in its shape.) `weight_layout=
    "axis_order"` reads weights the way tfnorm 0.1.0 stored them for an
    out-of-order `axis` list (dims in the order of `axis`, transposed into
    place); configs saved by that version load with it automatically.
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
        weight_layout="keras",
        **kwargs,
    ):
        super().__init__(axis=axis, epsilon=epsilon, **kwargs)
        if weight_layout not in _WEIGHT_LAYOUTS:
            raise ValueError(
                f"`weight_layout` must be one of {_WEIGHT_LAYOUTS}. "
                f"Received: weight_layout={weight_layout!r}"
            )
        self.weight_layout = weight_layout
        self.center = validate_bool("center", center)
        self.scale = validate_bool("scale", scale)
        self.beta_initializer = keras.initializers.get(beta_initializer)
        self.gamma_initializer = keras.initializers.get(gamma_initializer)
        self.beta_regularizer = keras.regularizers.get(beta_regularizer)
        self.gamma_regularizer = keras.regularizers.get(gamma_regularizer)
        self.beta_constraint = keras.constraints.get(beta_constraint)
        self.gamma_constraint = keras.constraints.get(gamma_constraint)

    def build(self, input_shape):
        super().build(input_shape)
        entries = axis_entries(self.axis)
        if self.weight_layout == "keras":
            dims = keras_weight_dims(entries)
        else:
            dims = range(len(entries))
        shape = tuple(self._axis_sizes[i] for i in dims)
        self.gamma = None
        self.beta = None
        if self.scale:
            self.gamma = self._add_param(
                "gamma",
                self.gamma_initializer,
                self.gamma_regularizer,
                self.gamma_constraint,
                shape,
            )
        if self.center:
            self.beta = self._add_param(
                "beta",
                self.beta_initializer,
                self.beta_regularizer,
                self.beta_constraint,
                shape,
            )

    def _broadcast_param(self, weight, dtype, positive, rank):
        value = tf.cast(tf.convert_to_tensor(weight), dtype)
        order = input_order(positive)
        if self.weight_layout == "axis_order" and order != sorted(order):
            value = tf.transpose(value, order)
        target = [1] * rank
        for p, size in zip(positive, self._axis_sizes):
            target[p] = size
        return tf.reshape(value, target)

    def weights_in_input_order(self):
        values = self.get_weights()
        if self.weight_layout == "axis_order":
            # Stored with dims in `axis` order; put in the input's order.
            values = [np.transpose(v, self._built_order) for v in values]
        return values

    def set_weights_in_input_order(self, values):
        if self.weight_layout == "axis_order":
            sizes = [self._axis_sizes[i] for i in self._built_order]
            inverse = np.argsort(self._built_order)
            values = [np.transpose(np.reshape(v, sizes), inverse) for v in values]
        super().set_weights_in_input_order(values)

    def _gamma_beta(self, x, positive):
        """γ and β broadcast to the rank of `x` in its statistics dtype, or
        None when off."""
        rank = x.shape.rank
        dtype = statistics_dtype(x.dtype)
        gamma = beta = None
        if self.gamma is not None:
            gamma = self._broadcast_param(self.gamma, dtype, positive, rank)
        if self.beta is not None:
            beta = self._broadcast_param(self.beta, dtype, positive, rank)
        return gamma, beta

    @classmethod
    def from_config(cls, config):
        config = portable_layer_config(dict(config))
        # Checked here too: Keras's `from_config` rewraps constructor errors
        # into a TypeError quoting the whole config.
        for key in ("center", "scale", "zero_centered_gamma"):
            if key in config:
                validate_bool(key, config[key])
        axis = config.get("axis")
        # tfnorm 0.1.0 wrote no `weight_layout`; an out-of-order list then
        # meant the old layout. (Keras 3 configs, which carry `rms_scaling`,
        # always mean Keras's.)
        if (
            "weight_layout" not in config
            and "rms_scaling" not in config
            and isinstance(axis, (list, tuple))
            and len(axis) > 1
        ):
            config["weight_layout"] = "axis_order"
        return super().from_config(config)

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
        # Only a list of several axes can be laid out two ways; other configs
        # keep exactly Keras's keys.
        if len(axis_entries(self.axis)) > 1:
            config["weight_layout"] = self.weight_layout
        return config

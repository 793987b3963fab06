"""What every tfnorm normalisation layer shares."""

from __future__ import annotations

import numpy as np

from tfnorm._checks import is_int, is_real
from tfnorm._keras import (
    Layer,
    add_weight,
    keep_input_dtype,
    keras,
    keras_weight_dims,
    plain_axis,
    portable_layer_config,
    tf,
)

_FLOAT32 = np.finfo(np.float32)
#: The positive numbers float32 holds as normal numbers. Below, a value is
#: subnormal (CPUs flush it to 0 in TensorFlow's kernels) or 0; above, inf.
FLOAT32_NORMAL_RANGE = (float(_FLOAT32.tiny), float(_FLOAT32.max))


def _validate_epsilon(epsilon, epsilon_range, layer_class):
    low, high = epsilon_range
    if not is_real(epsilon) or not low <= epsilon <= high:
        raise ValueError(
            f"`epsilon` must be a number in about [{low:.3g}, {high:.3g}] for "
            f"{layer_class.__name__}: its statistics are float32, which turns "
            "a smaller or larger epsilon into 0 or inf (NaN or all-zero "
            f"outputs). Received: epsilon={epsilon!r}"
        )
    return float(epsilon)


def validate_bool(name, value):
    """`value` if it is a real boolean, else a ValueError naming `name`.

    `bool("false")` is True: a string or number from a config file would
    silently turn the option on, so only True and False (or NumPy's) pass.
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"`{name}` must be True or False. Received: {name}={value!r}")


def _validate_axis_type(axis):
    if isinstance(axis, (list, tuple)):
        values = list(axis)
    else:
        values = [axis]
    if not values or not all(is_int(a) for a in values):
        # Keras's own norms word these errors so; its layer tests match them.
        raise TypeError(
            "Expected an int or a list/tuple of ints for the argument 'axis' "
            f"(`axis` must be an int or a non-empty list of ints). Received: axis={axis!r}"
        )
    # Stored as given (an int stays an int, negatives stay negative) so a
    # saved config is not tied to the rank of the input it was built on.
    return [int(a) for a in values] if isinstance(axis, (list, tuple)) else int(axis)


def _entries(axis):
    return [axis] if isinstance(axis, int) else list(axis)


def _resolve_axes(axis, shape):
    """The non-negative dims `axis` names in `shape`, in the order of `axis`."""
    rank = shape.rank
    positive = []
    for a in _entries(axis):
        if not -rank <= a < rank:
            raise ValueError(
                "Invalid value for `axis` argument. Expected 0 <= axis < "
                f"inputs.rank (with inputs.rank={rank}), or a negative axis "
                f"counting from the end: `axis` {a} is out of range for an "
                f"input of shape {shape}. Received: axis={plain_axis(axis)!r}"
            )
        positive.append(a % rank)
    if len(set(positive)) != len(positive):
        raise ValueError(
            f"Duplicate axis: `axis` names the same dimension twice for an "
            f"input of rank {rank}. Received: axis={plain_axis(axis)!r}"
        )
    return positive


def _input_order(positive):
    """Entry indices of `axis` in the order of the input's dims."""
    return sorted(range(len(positive)), key=positive.__getitem__)


def _in_statistics_dtype(inputs):
    # float32 whatever the policy (half types lose the statistics' digits);
    # float64 inputs keep float64.
    dtype = tf.as_dtype(inputs.dtype)
    return tf.cast(inputs, tf.float64 if dtype == tf.float64 else tf.float32)


class BaseNormalization(Layer):
    """Base class of tfnorm's normalisation layers.

    Holds what all norms share: `axis` and `epsilon` validation, negative
    axes resolved against the rank of each call, statistics in float32 from
    the input as given (float64 inputs keep float64; no cast to float16 under
    a mixed policy first), weights created in the variable dtype without
    autocasting, ragged inputs normalised over their uniform inner dims, mask
    pass-through and the common config. Subclasses create their weights in
    `build` after calling `super().build` and implement
    `_normalize(x, positive)`, `positive` being this call's dims in the order
    of `axis`, and `_row_statistic(x, axes)`, the per-row quantity their
    formula compares with `epsilon`, which monitoring reads through
    `row_statistic` (see `tfnorm.callbacks.NormHealthMonitor`).

    Args:
        axis: int or list of ints, the axes to normalise over. Negative
            values count from the end of each input's shape; axes need not be
            contiguous.
        epsilon: small positive float added for numerical stability, within
            the class's `_epsilon_range` (float32's normal numbers, about
            1.2e-38 to 3.4e38, unless the formula squares it).
        **kwargs: base layer keyword arguments (`name`, `dtype`, ...).
    """

    #: Whether weights are tied to the sizes of the normalised dims (a layer
    #: shared between inputs must then see the same sizes there).
    _sized_weights = True

    #: The `epsilon` values the formula can use: those float32 (the
    #: statistics dtype) holds as normal numbers.
    _epsilon_range = FLOAT32_NORMAL_RANGE

    #: What `row_statistic` measures ("variance", "mean_square", "norm").
    row_statistic_name = None

    def __init__(self, axis=-1, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.axis = _validate_axis_type(axis)
        self.epsilon = _validate_epsilon(epsilon, self._epsilon_range, type(self))
        self.supports_masking = True
        keep_input_dtype(self)
        self._axis_sizes = None

    def build(self, input_shape):
        shape = tf.TensorShape(input_shape)
        if shape.rank is None:
            raise ValueError(
                f"{type(self).__name__} needs an input of known rank. "
                f"Received: input_shape={input_shape}"
            )
        positive = _resolve_axes(self.axis, shape)
        for a in positive:
            if shape[a] is None:
                raise ValueError(
                    f"The size of every normalised axis must be known, but axis "
                    f"{a} of input shape {shape} is None. "
                    f"Received: axis={plain_axis(self.axis)!r}"
                )
        # Sizes in the order of `axis`: what the weights were made for.
        self._axis_sizes = tuple(int(shape[a]) for a in positive)
        self._built_order = tuple(_input_order(positive))
        self.built = True

    def _call_axes(self, shape):
        """This input's dims named by `axis` (in `axis` order), checked
        against the shape the weights were built for."""
        if shape.rank is None:
            raise ValueError(
                f"{type(self).__name__} needs an input of known rank. "
                f"Received: input shape {shape}"
            )
        positive = _resolve_axes(self.axis, shape)
        if not self._sized_weights:
            return positive
        for a, p, size in zip(_entries(self.axis), positive, self._axis_sizes):
            if shape[p] is not None and shape[p] != size:
                raise ValueError(
                    f"Layer '{self.name}' was built with weights for size "
                    f"{size} along axis {a}, but this input (shape {shape}) "
                    f"has size {shape[p]} there. "
                    f"Received: axis={plain_axis(self.axis)!r}"
                )
        if tuple(_input_order(positive)) != self._built_order:
            raise ValueError(
                f"Layer '{self.name}' cannot serve an input of rank "
                f"{shape.rank} (shape {shape}): there the dims named by `axis` "
                f"come in another order than in the input it was built on, "
                f"so its weights would be misread. "
                f"Received: axis={plain_axis(self.axis)!r}"
            )
        return positive

    def _add_param(self, name, initializer, regularizer, constraint, shape):
        # Not autocast: under a mixed policy γ/β stay float32, as do the
        # statistics they multiply.
        return add_weight(
            self,
            name=name,
            shape=shape,
            initializer=initializer,
            regularizer=regularizer,
            constraint=constraint,
            autocast=False,
        )

    def call(self, inputs):
        dtype = tf.as_dtype(inputs.dtype)
        if not dtype.is_floating:
            raise TypeError(
                f"{type(self).__name__} normalises floating-point inputs only. "
                f"Received: inputs.dtype={dtype.name}"
            )
        positive = self._call_axes(inputs.shape)
        if isinstance(inputs, tf.RaggedTensor):
            return self._call_ragged(inputs, positive)
        return self._apply(inputs, positive)

    def _apply(self, inputs, positive):
        outputs = self._normalize(_in_statistics_dtype(inputs), positive)
        return tf.cast(outputs, self.compute_dtype)

    def _call_ragged(self, inputs, positive):
        # Each row of a ragged dim is its own example; the statistics are
        # over the uniform inner dims, which the flat values hold. (`build`
        # has rejected an `axis` naming a ragged dim: its size is unknown.)
        flat = [p - inputs.ragged_rank for p in positive]
        return inputs.with_flat_values(self._apply(inputs.flat_values, flat))

    def _normalize(self, x, positive):
        raise NotImplementedError

    def reduction_axes(self, rank):
        """The dims this layer normalises over in an input of `rank`,
        non-negative and sorted."""
        return sorted(_resolve_axes(self.axis, tf.TensorShape([None] * rank)))

    def row_statistic(self, inputs):
        """The per-row quantity this layer compares with `epsilon`.

        The spread it divides by before `epsilon` enters (the variance for
        LayerNormalization, the mean square for RMSNorm, the l2 norm for
        ScaleNorm), computed as the layer computes it: in float32 (float64
        for float64 inputs), over `reduction_axes`. When it is not well
        above `epsilon`, `epsilon` dominates and the layer no longer
        normalises.

        Args:
            inputs: a dense floating-point tensor the layer could be called on.

        Returns:
            A tensor of the input's shape without the normalised dims.
        """
        x = _in_statistics_dtype(inputs)
        return self._row_statistic(x, self.reduction_axes(x.shape.rank))

    def _row_statistic(self, x, axes):
        raise NotImplementedError

    def compute_output_shape(self, input_shape):
        shape = tf.TensorShape(input_shape)
        if shape.rank is not None:
            _resolve_axes(self.axis, shape)
        return input_shape

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = super().get_config()
        config.update({"axis": plain_axis(self.axis), "epsilon": self.epsilon})
        return config


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
        entries = _entries(self.axis)
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
        order = _input_order(positive)
        if self.weight_layout == "axis_order" and order != sorted(order):
            value = tf.transpose(value, order)
        target = [1] * rank
        for p, size in zip(positive, self._axis_sizes):
            target[p] = size
        return tf.reshape(value, target)

    def _gamma_beta(self, x, positive):
        """γ and β broadcast to the rank of `x` in its dtype, or None when off."""
        rank = x.shape.rank
        gamma = beta = None
        if self.gamma is not None:
            gamma = self._broadcast_param(self.gamma, x.dtype, positive, rank)
        if self.beta is not None:
            beta = self._broadcast_param(self.beta, x.dtype, positive, rank)
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
        if len(_entries(self.axis)) > 1:
            config["weight_layout"] = self.weight_layout
        return config

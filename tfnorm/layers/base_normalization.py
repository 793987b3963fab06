"""`BaseNormalization`: what every tfnorm normalisation layer shares."""

from __future__ import annotations

import numpy as np

from tfnorm._keras import Layer, add_weight, keep_input_dtype, plain_axis, tf
from tfnorm.layers.arguments import (
    FLOAT32_NORMAL_RANGE,
    axis_entries,
    in_statistics_dtype,
    input_order,
    resolve_axes,
    validate_axis_type,
    validate_epsilon,
)


class BaseNormalization(Layer):
    """Base class of tfnorm's normalisation layers.

    Holds what all norms share: `axis` and `epsilon` validation, negative
    axes resolved against the rank of each call, statistics in float32 from
    the input as given (float64 inputs keep float64; no cast to float16 under
    a mixed policy first), weights created in the variable dtype without
    autocasting, ragged inputs normalised over their uniform inner dims, mask
    pass-through and the common config. Subclasses create their weights in
    `build` after calling `super().build` and implement
    `_normalize(inputs, positive)`, `inputs` in their own dtype (the formula
    casts them to `statistics_dtype`) and `positive` being this call's dims
    in the order of `axis`, and `_row_statistic(x, axes)`, the per-row quantity their
    formula compares with `epsilon`, which monitoring reads through
    `row_statistic` (see `tfnorm.callbacks.NormHealthMonitor`).

    A norm that divides by no statistic (DyT's `tanh(alpha * x)`) sets
    `has_row_statistic = False`: it takes no `epsilon`, needs no
    `_row_statistic`, and monitoring checks its outputs only.

    A new norm joins the family with a module of its own (its class and
    formula), an entry in `tfnorm.choices.NORMS` (its name, aliases and one
    line of help) and `@register_norm(name)` on the class: `get_norm`, every
    `norm=` argument, `--norm` and its help text then know it.

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

    #: Whether the formula divides by a per-row statistic guarded by
    #: `epsilon` (False for a norm such as DyT, which takes no `epsilon`).
    has_row_statistic = True

    #: What `row_statistic` measures ("variance", "mean_square", "norm").
    row_statistic_name = None

    def __init__(self, axis=-1, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.axis = validate_axis_type(axis)
        if self.has_row_statistic:
            self.epsilon = validate_epsilon(epsilon, self._epsilon_range, type(self))
        elif epsilon is not None:
            raise ValueError(
                f"{type(self).__name__} divides by no statistic, so it takes no "
                f"`epsilon`. Received: epsilon={epsilon!r}"
            )
        else:
            self.epsilon = None
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
        positive = resolve_axes(self.axis, shape)
        for a in positive:
            if shape[a] is None:
                raise ValueError(
                    f"The size of every normalised axis must be known, but axis "
                    f"{a} of input shape {shape} is None. "
                    f"Received: axis={plain_axis(self.axis)!r}"
                )
        # Sizes in the order of `axis`: what the weights were made for.
        self._axis_sizes = tuple(int(shape[a]) for a in positive)
        self._built_order = tuple(input_order(positive))
        self.built = True

    def _call_axes(self, shape):
        """This input's dims named by `axis` (in `axis` order), checked
        against the shape the weights were built for."""
        if shape.rank is None:
            raise ValueError(
                f"{type(self).__name__} needs an input of known rank. "
                f"Received: input shape {shape}"
            )
        positive = resolve_axes(self.axis, shape)
        if not self._sized_weights:
            return positive
        for a, p, size in zip(axis_entries(self.axis), positive, self._axis_sizes):
            if shape[p] is not None and shape[p] != size:
                raise ValueError(
                    f"Layer '{self.name}' was built with weights for size "
                    f"{size} along axis {a}, but this input (shape {shape}) "
                    f"has size {shape[p]} there. "
                    f"Received: axis={plain_axis(self.axis)!r}"
                )
        if tuple(input_order(positive)) != self._built_order:
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
        return tf.cast(self._normalize(inputs, positive), self.compute_dtype)

    def _call_ragged(self, inputs, positive):
        # Each row of a ragged dim is its own example; the statistics are
        # over the uniform inner dims, which the flat values hold. (`build`
        # has rejected an `axis` naming a ragged dim: its size is unknown.)
        flat = [p - inputs.ragged_rank for p in positive]
        return inputs.with_flat_values(self._apply(inputs.flat_values, flat))

    def _normalize(self, inputs, positive):
        """The layer's output for dense `inputs` in their own dtype, its
        statistics in `statistics_dtype`; the output's dtype is cast to the
        compute dtype afterwards (a no-op when the formula made it so)."""
        raise NotImplementedError

    def weights_in_input_order(self):
        """The layer's weight values, each laid out as Keras's own norms lay
        theirs out: its entries in the order of the input's dims.

        Keras's `LayerNormalization` and this layer (with the default
        `weight_layout="keras"`) store weights that way already; a layer
        that stores them otherwise (tfnorm 0.1.0's `"axis_order"` layout)
        puts them in that order here, so another norm can take them with
        `set_weights_in_input_order`.

        Returns:
            A list of NumPy arrays, in the order of `self.weights`.
        """
        return self.get_weights()

    def set_weights_in_input_order(self, values):
        """Sets the layer's weights from values laid out as
        `weights_in_input_order` returns them (Keras's layout), reshaped to
        the layer's own weight shapes.

        Args:
            values: a list of arrays, one per weight, in the order of
                `self.weights`.
        """
        self.set_weights(
            [np.reshape(v, tuple(w.shape)) for v, w in zip(values, self.weights)]
        )

    def reduction_axes(self, rank):
        """The dims this layer normalises over in an input of `rank`,
        non-negative and sorted."""
        return sorted(resolve_axes(self.axis, tf.TensorShape([None] * rank)))

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
            A tensor of the input's shape without the normalised dims, or
            None for a norm without a statistic (`has_row_statistic`).
        """
        if not self.has_row_statistic:
            return None
        x = in_statistics_dtype(inputs)
        return self._row_statistic(x, self.reduction_axes(x.shape.rank))

    def _row_statistic(self, x, axes):
        raise NotImplementedError

    def compute_output_shape(self, input_shape):
        shape = tf.TensorShape(input_shape)
        if shape.rank is not None:
            resolve_axes(self.axis, shape)
        return input_shape

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = super().get_config()
        config["axis"] = plain_axis(self.axis)
        if self.has_row_statistic:
            config["epsilon"] = self.epsilon
        return config

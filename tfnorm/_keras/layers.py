"""Building layers the same way in every Keras: weights, sublayers built
from a parent's `build`, attention, masks, recorded input shapes.

Keras 2 and Keras 3 differ in the keywords of `add_weight`, in where a
sublayer's weights get their names, in how `MultiHeadAttention` is built from
shapes, and in how the implicit mask travels with a tensor.
"""

from __future__ import annotations

import inspect

from tfnorm._keras.runtime import IS_KERAS_3, keras, tf


def add_weight(
    layer,
    name,
    shape,
    initializer,
    regularizer=None,
    constraint=None,
    trainable=True,
    autocast=True,
):
    """`layer.add_weight` with the keyword set both Keras generations accept.

    Keras 2 calls the autocast switch `experimental_autocast`; Keras 3 calls
    it `autocast` and rejects unknown keywords.
    """
    kwargs = {
        "name": name,
        "shape": tuple(shape),
        "initializer": initializer,
        "regularizer": regularizer,
        "constraint": constraint,
        "trainable": trainable,
    }
    if not IS_KERAS_3:
        return layer.add_weight(experimental_autocast=autocast, **kwargs)
    if _ADD_WEIGHT_TAKES_AUTOCAST:
        return layer.add_weight(autocast=autocast, **kwargs)
    # Keras 3.0.x (TensorFlow 2.16's GPU Jupyter image) has the switch on the
    # variable only.
    variable = layer.add_weight(**kwargs)
    variable._autocast = autocast
    return variable


def assign_slice(variable, begin, value):
    """Writes `value` into `variable` from index `begin` on, in place.

    Only the slice `value` covers is written, so a large weight can be
    filled a slab at a time without a full-size temporary (Keras 3
    variables have no `variable[a:b].assign`). `value` is cast to the
    variable's own dtype (a mixed-precision variable's stored one). Not
    under a distribution strategy: a replicated variable is written whole.
    """
    dtype = getattr(variable, "true_dtype", None) or variable.dtype
    value = tf.cast(tf.convert_to_tensor(value), dtype)
    begin = [int(b) for b in begin]
    end = [b + int(size) for b, size in zip(begin, value.shape)]
    tf.raw_ops.ResourceStridedSliceAssign(
        ref=variable.handle,
        begin=begin,
        end=end,
        strides=[1] * len(begin),
        value=value,
    )


def _add_weight_takes_autocast():
    try:
        parameters = inspect.signature(keras.layers.Layer.add_weight).parameters
    except (TypeError, ValueError):
        return True
    return "autocast" in parameters


_ADD_WEIGHT_TAKES_AUTOCAST = IS_KERAS_3 and _add_weight_takes_autocast()


def keep_input_dtype(layer):
    """Stops Keras from casting `layer`'s floating inputs to its compute dtype.

    Under a mixed policy a norm must take its statistics from the input as
    given (float32 from a float32 producer), not from a float16 copy. Keras 3
    reads the public `autocast` attribute in `__call__`, Keras 2 the private
    `_autocast`; the layer then casts its output itself.
    """
    if IS_KERAS_3:
        layer.autocast = False
    else:
        layer._autocast = False


def keras_weight_dims(axis_entries):
    """The order of `axis_entries` that Keras's own norm weights follow.

    Returns entry indices. Keras 3 sorts the `axis` values as given (so
    `[-1, -2]` gives dims `(-2, -1)`; mixed signs sort negatives first);
    Keras 2 and tf_keras keep the order of `axis`. Both read the weight's
    values in the order of the input's dims (a reshape, not a transpose), so
    only the shape differs.
    """
    indices = list(range(len(axis_entries)))
    if IS_KERAS_3:
        return sorted(indices, key=axis_entries.__getitem__)
    return indices


def plain_axis(axis):
    """`axis` as a plain int or list (Keras 2 wraps list attributes in a
    tracking `ListWrapper`, which would show in messages and configs)."""
    if isinstance(axis, int):
        return axis
    return [int(a) for a in axis]


def keras_rms_normalization():
    """Keras's own RMSNormalization class (Keras >= 3.9), or None."""
    return getattr(keras.layers, "RMSNormalization", None)


def keras_norm_classes():
    """Keras's own normalisation layer classes that tfnorm's norms stand in for:
    LayerNormalization, and RMSNormalization where this Keras has it."""
    rms = keras_rms_normalization()
    return (keras.layers.LayerNormalization,) + (() if rms is None else (rms,))


def get_keras_mask(tensor):
    """The implicit Keras mask attached to `tensor`, or None."""
    return getattr(tensor, "_keras_mask", None)


def padding_mask_like(sequence, keras_mask=None):
    """A float32 `(batch, seq)` padding mask for `sequence` `(batch, seq, ...)`.

    `keras_mask` (True for real tokens) as 1/0 if given, else all ones.
    Keras 3 also calls models on symbolic `KerasTensor`s, which TensorFlow
    ops reject; those get a symbolic tensor of the right shape.
    """
    if IS_KERAS_3 and isinstance(sequence, keras.KerasTensor):
        return keras.KerasTensor(tuple(sequence.shape[:2]), dtype="float32")
    if keras_mask is not None:
        return tf.cast(keras_mask, tf.float32)
    return tf.ones(tf.shape(sequence)[:2], dtype=tf.float32)


def build_sublayer(layer, input_shape):
    """Builds `layer` (a sublayer) from its parent's `build`, named after it.

    Keras 3 scopes weight paths by the layer's name inside `build` itself.
    Keras 2 does so only in `__call__`, so a sublayer built directly would
    name its weights after the parent alone (two norms' `gamma`s collide in
    H5 files) unless its name scope is entered here.
    """
    if IS_KERAS_3:
        layer.build(input_shape)
    else:
        with tf.name_scope(layer.name):
            layer.build(input_shape)


def build_attention(attention, query_shape, value_shape):
    """Builds a MultiHeadAttention layer's weights from input shapes.

    Keras 3 builds it with `build(query_shape, value_shape)`; Keras 2 only
    through a private `_build_from_signature` that takes tensors or shapes.
    """
    if IS_KERAS_3:
        attention.build(query_shape, value_shape)
    elif not getattr(attention, "_built_from_signature", False):
        query_shape = tf.TensorShape(query_shape)
        value_shape = tf.TensorShape(value_shape)
        # Name scopes as in `build_sublayer`, for the projections' weights.
        with tf.name_scope(attention.name):
            attention._build_from_signature(query_shape, value_shape)
            # Keras 2 creates the projections there but builds them only on
            # the first call; build them now so that, as in Keras 3, every
            # weight exists (and can be rescaled) once `build` returns.
            heads_shape = query_shape[:-1].concatenate(
                [attention._num_heads, attention._value_dim]
            )
            shapes = (query_shape, value_shape, value_shape, heads_shape)
            for dense, shape in zip(attention_projections(attention), shapes):
                if not dense.built:
                    with tf.name_scope(dense.name):
                        dense.build(shape)
        # Keras 2.9 marks the layer built only in its first `__call__`.
        attention.built = True


def attention_projections(attention):
    """A built MultiHeadAttention layer's query, key, value and output
    projections (EinsumDense layers, private attributes in every Keras)."""
    return (
        attention._query_dense,
        attention._key_dense,
        attention._value_dense,
        attention._output_dense,
    )


def without_keras_mask(x):
    """`x`, or a copy without its implicit Keras mask if it carries one.

    Keras 3's MultiHeadAttention deletes the Keras mask of the tensor it
    receives, so a caller that uses that tensor again (the residual of a
    Post-LN block) would lose the mask; passing attention a copy keeps it.
    """
    return x if get_keras_mask(x) is None else tf.identity(x)


def built_input_shape(layer):
    """The input shape `layer` was built with (a tuple, None for unknown
    dims), or None if this Keras did not record it.

    Keras 3 records it for `build` called directly or from `__call__` in
    `_build_shapes_dict`; Keras 2 in `_build_input_shape`.
    """
    if IS_KERAS_3:
        shapes = getattr(layer, "_build_shapes_dict", None) or {}
        shape = next(iter(shapes.values()), None) if len(shapes) == 1 else None
    else:
        shape = getattr(layer, "_build_input_shape", None)
    if shape is None:
        return None
    try:
        return tuple(tf.TensorShape(shape).as_list())
    except (TypeError, ValueError):
        return None


def record_built_shape(layer, input_shape):
    """Records `input_shape` as the shape `layer` was built with, as
    `__call__` would (Keras 2 records it only there or in `Layer.build`);
    `built_input_shape` reads it."""
    if IS_KERAS_3:
        if not getattr(layer, "_build_shapes_dict", None):
            layer._build_shapes_dict = {"input_shape": tuple(input_shape)}
    else:
        layer._build_input_shape = tf.TensorShape(input_shape)


#: Whether Keras's `BatchNormalization` takes a `mask` in its call, leaving
#: masked positions out of its batch statistics: Keras 3 and tf_keras do;
#: Keras 2.9's call has no `mask`, so padding counts in its statistics.
BATCH_NORM_TAKES_MASK = (
    "mask" in inspect.signature(keras.layers.BatchNormalization.call).parameters
)


def call_batch_norm(layer, inputs, training=None, mask=None):
    """`layer` (a Keras `BatchNormalization`) on `inputs`, its statistics
    over the positions `mask` keeps where this Keras can (see
    `BATCH_NORM_TAKES_MASK`), over every position otherwise."""
    if mask is not None and BATCH_NORM_TAKES_MASK:
        return layer(inputs, training=training, mask=mask)
    return layer(inputs, training=training)

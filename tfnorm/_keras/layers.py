"""Building and inspecting layers: weights, sublayers, attention, masks.

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


def is_graph_model(layer):
    """True for Sequential and functional models (those `clone_model` can
    rebuild layer by layer), False for subclassed models and plain layers.

    Keras 3 gives functional models their own class; Keras 2 marks them (and
    Sequential models) with `_is_graph_network`.
    """
    if isinstance(layer, keras.Sequential):
        return True
    if IS_KERAS_3:
        from keras.src.models.functional import Functional

        return isinstance(layer, Functional)
    return bool(getattr(layer, "_is_graph_network", False))


def keras_rms_normalization():
    """Keras's own RMSNormalization class (Keras >= 3.9), or None."""
    return getattr(keras.layers, "RMSNormalization", None)


def keras_norm_classes():
    """Keras's own normalisation layer classes that tfnorm's norms stand in for:
    LayerNormalization, and RMSNormalization where this Keras has it."""
    rms = keras_rms_normalization()
    return (keras.layers.LayerNormalization,) + (() if rms is None else (rms,))


def sublayers(layer, recursive=True):
    """The layers nested in `layer` (not `layer` itself): at any depth, or
    only its direct children with `recursive=False`.

    `_flatten_layers` has this signature in Keras 2.9, tf_keras and Keras 3,
    and finds sublayers held in attributes, lists and dicts alike.
    """
    return list(layer._flatten_layers(include_self=False, recursive=recursive))


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


def is_functional_subclass(model):
    """True for a functional model of a class other than Keras's own
    (keras-hub's backbones): `clone_model` would return a plain functional
    model, dropping the class and its config."""
    if not is_graph_model(model) or isinstance(model, keras.Sequential):
        return False
    return not type(model).__module__.startswith(("keras.", "tf_keras."))


def _tracked_layer_lists(parent):
    """The lists in which `parent` tracks its sublayers, in the order Keras
    walks them (`_layers` in Keras 3, `_self_tracked_trackables` in Keras 2)."""
    name = "_layers" if IS_KERAS_3 else "_self_tracked_trackables"
    found = getattr(parent, name, None)
    return [found] if isinstance(found, list) else []


def _tracked_positions(parent, layer):
    """Where `layer` sits in each of `parent`'s tracking lists."""
    return [
        [i for i, item in enumerate(tracked) if item is layer]
        for tracked in _tracked_layer_lists(parent)
    ]


def _swap_in_tracked_lists(parent, old, new, positions):
    # Assigning `new` appends it to the tracking list (and Keras 2 drops the
    # `old` it overwrites); put `new` where `old` was instead, so the order
    # of the weights (and H5 files, which rely on it) is kept.
    for tracked, where in zip(_tracked_layer_lists(parent), positions):
        kept = [item for item in tracked if item is not new and item is not old]
        for i in where:
            kept.insert(min(i, len(kept)), new)
        if not where and any(item is new for item in tracked):
            kept.append(new)
        tracked[:] = kept
    if IS_KERAS_3:
        tracker = getattr(parent, "_tracker", None)
        stored = getattr(tracker, "stored_ids", None)
        if isinstance(stored, dict) and "layers" in stored:
            stored["layers"].discard(id(old))
            stored["layers"].add(id(new))


def record_built_shape(layer, input_shape):
    """Records `input_shape` as the shape `layer` was built with, as
    `__call__` would (Keras 2 records it only there or in `Layer.build`);
    `built_input_shape` reads it."""
    if IS_KERAS_3:
        if not getattr(layer, "_build_shapes_dict", None):
            layer._build_shapes_dict = {"input_shape": tuple(input_shape)}
    else:
        layer._build_input_shape = tf.TensorShape(input_shape)


def holders(parent, layer):
    """Where `parent` holds `layer`: `[(attribute, key)]`, `key` None for a
    plain attribute, else the index (list) or key (dict) inside it."""
    found = []
    for name, value in list(vars(parent).items()):
        if value is layer:
            found.append((name, None))
        elif isinstance(value, (list, tuple)) and not isinstance(value, str):
            try:
                items = list(value)
            except TypeError:
                continue
            found.extend((name, i) for i, item in enumerate(items) if item is layer)
        elif isinstance(value, dict):
            found.extend((name, k) for k, item in value.items() if item is layer)
    # Keras's own tracking lists are not where user code holds a layer.
    return [
        (name, key)
        for name, key in found
        if name not in ("_layers", "_self_tracked_trackables", "_tracker")
    ]


def replace_sublayer(parent, old, new):
    """Puts `new` wherever the (non-graph) layer `parent` holds `old`: an
    attribute, or an entry of a list or dict attribute.

    Returns the number of places replaced (0 if `parent` holds `old` in a
    way this cannot reach, such as a tuple or a closure).
    """
    places = holders(parent, old)
    positions = _tracked_positions(parent, old)
    replaced = 0
    with _unlocked(parent):
        for name, key in places:
            container = getattr(parent, name)
            if key is None:
                setattr(parent, name, new)
            elif isinstance(container, tuple):
                continue
            else:
                container[key] = new
            replaced += 1
        if replaced:
            _swap_in_tracked_lists(parent, old, new, positions)
    return replaced


class _unlocked:
    """Lets a built Keras 3 layer take a new sublayer: Keras 3 locks a
    layer's state once it is built (Keras 2 has no such lock)."""

    def __init__(self, layer):
        self.tracker = getattr(layer, "_tracker", None) if IS_KERAS_3 else None
        self.was_locked = bool(getattr(self.tracker, "locked", False))

    def __enter__(self):
        if self.was_locked:
            self.tracker.unlock()

    def __exit__(self, *exc_info):
        if self.was_locked:
            self.tracker.lock()


def replace_graph_layer(model, old, new):
    """Makes `new` (built, same name) run wherever `old` runs in the
    functional or Sequential `model`'s graph, in place.

    The graph's nodes call their layer object, so each node of `old` is
    pointed at `new`, and so are the model's lists of layers. `model`'s
    config then records `new`'s class. Returns True if `old` was a layer of
    `model`'s graph.
    """
    if IS_KERAS_3:
        operations = getattr(model, "_operations", None)
        if not operations or not any(op is old for op in operations):
            return False
        for node in list(old._inbound_nodes):
            node.operation = new
        new._inbound_nodes = list(old._inbound_nodes)
        new._outbound_nodes = list(old._outbound_nodes)
        positions = _tracked_positions(model, old)
        model._operations = [new if op is old else op for op in operations]
        for depth, ops in model._operations_by_depth.items():
            model._operations_by_depth[depth] = [new if op is old else op for op in ops]
        if isinstance(model, keras.Sequential):
            model._layers = [new if layer is old else layer for layer in model._layers]
        else:
            _swap_in_tracked_lists(model, old, new, positions)
        return True
    tracked = getattr(model, "_self_tracked_trackables", None) or []
    if not any(layer is old for layer in tracked):
        return False
    for node in list(old._inbound_nodes):
        node.layer = new
    new._inbound_nodes_value = list(old._inbound_nodes)
    new._outbound_nodes_value = list(old._outbound_nodes)
    _swap_in_tracked_lists(model, old, new, _tracked_positions(model, old))
    specs = getattr(model, "_layer_call_argspecs", None)
    if isinstance(specs, dict) and old in specs:
        specs[new] = specs.pop(old)
    for name in ("_output_layers", "_input_layers"):
        layers = getattr(model, name, None)
        if isinstance(layers, list):
            layers[:] = [new if layer is old else layer for layer in layers]
    return True


def shadow_call(layer, call):
    """Makes `layer(...)` run `call` instead of its class's `call` until
    `unshadow_call(layer)`.

    Set with `object.__setattr__`, which bypasses Keras's attribute tracking:
    `call` is a plain function, not state of the layer, and is deleted again
    by `unshadow_call`.
    """
    object.__setattr__(layer, "call", call)


def unshadow_call(layer):
    """Removes what `shadow_call` installed; the class's `call` is back."""
    object.__delattr__(layer, "call")

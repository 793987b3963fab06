"""Layer surgery: finding a layer's sublayers and putting one layer in
another's place, in a graph model or in a subclassed layer's attributes.

Keras 2 and Keras 3 track sublayers in differently named private lists,
lock a built layer's state differently (Keras 3 only), and point a graph's
nodes at their layer through differently named attributes.
"""

from __future__ import annotations

from tfnorm._keras.runtime import IS_KERAS_3, keras


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


def sublayers(layer, recursive=True):
    """The layers nested in `layer` (not `layer` itself): at any depth, or
    only its direct children with `recursive=False`.

    `_flatten_layers` has this signature in Keras 2.9, tf_keras and Keras 3,
    and finds sublayers held in attributes, lists and dicts alike.
    """
    return list(layer._flatten_layers(include_self=False, recursive=recursive))


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
    with _unlocked(parent):
        replaced = _put_in_places(parent, places, new)
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
    if IS_KERAS_3 and isinstance(model, keras.Sequential):
        return _replace_in_keras3_sequential(model, old, new)
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


def _replace_in_keras3_sequential(model, old, new):
    """Keras 3's Sequential has no graph of its own: it keeps its layers in
    `_layers` and runs them through a functional model (`_functional`) it
    builds from that list. So `new` takes `old`'s place in the list, and the
    functional model is built again from it, as `Sequential.add` and `pop`
    do (Sequential, unlike other layers, stays mutable once built)."""
    if not any(layer is old for layer in model._layers):
        return False
    # Assigned whole, as Sequential.build does, so that Keras tracks `new`.
    model._layers = [new if layer is old else layer for layer in model._layers]
    if model._functional is not None:
        model._maybe_rebuild()
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


def rebind_attributes(model, old, new):
    """Points every attribute (or list/dict entry) of the graph `model` that
    still holds `old` at `new`, once `replace_graph_layer` has swapped them
    in the graph. Returns the number of places rebound.

    A functional model of its own class (keras-hub's backbones) also keeps
    its top-level layers as attributes (`backbone.layer_norm`); left on the
    old layer, those attributes keep it in every checkpoint and `.keras`
    file, where it would stand in for the layer the graph runs. Assigning
    the attribute would also re-append `new` to Keras's tracking lists, so
    their order (the order of the weights) is restored afterwards.
    """
    tracked = _tracked_layer_lists(model)
    snapshots = [list(items) for items in tracked]
    with _unlocked(model):
        replaced = _put_in_places(model, holders(model, old), new)
    for items, snapshot in zip(tracked, snapshots):
        items[:] = snapshot
    return replaced


def _put_in_places(parent, places, new):
    """Puts `new` at each of `places` (see `holders`) of `parent`; returns
    how many it reached (a tuple cannot take it)."""
    replaced = 0
    for name, key in places:
        container = getattr(parent, name)
        if key is None:
            setattr(parent, name, new)
            _retrack(parent, name, new)
        elif isinstance(container, tuple):
            continue
        else:
            container[key] = new
        replaced += 1
    return replaced


def _retrack(parent, name, new):
    # TensorFlow's checkpoints follow `parent`'s list of named dependencies,
    # which assigning the attribute again does not always update (the name
    # index may already point at `new` while the list keeps the old layer).
    dependencies = getattr(parent, "_self_unconditional_checkpoint_dependencies", None)
    if not isinstance(dependencies, list):
        return
    for index, reference in enumerate(dependencies):
        if reference.name == name and reference.ref is not new:
            dependencies[index] = type(reference)(name=name, ref=new)
    names = getattr(parent, "_self_unconditional_dependency_names", None)
    if isinstance(names, dict) and name in names:
        names[name] = new

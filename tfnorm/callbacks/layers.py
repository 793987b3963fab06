"""Finding layers in a model by path, and reading a norm layer's statistic."""

from __future__ import annotations

from tfnorm._keras import keras_rms_normalization, plain_axis, sublayers
from tfnorm.layers import BaseNormalization, LayerNormalization, RMSNorm, is_norm_layer
from tfnorm.layers.foreign import foreign_epsilon, foreign_norm


def walk_layers(model):
    """Yields `(path, layer)` for every layer below `model`, depth first.

    The path joins layer names from the model's direct children down, e.g.
    `encoder/block_3/attention_norm`; the model's own name is left out. A
    layer reachable by several paths (shared) is yielded once, under the
    first path. Layers nested in functional, Sequential and subclassed
    models and in composite layers (held in attributes, lists or dicts) are
    all found.
    """
    seen = set()
    used_paths = set()

    def visit(layer, prefix):
        for child in sublayers(layer, recursive=False):
            if id(child) in seen:
                continue
            seen.add(id(child))
            path = f"{prefix}{child.name}"
            if path in used_paths:
                # Subclassed layers may give two sublayers the same name.
                suffix = 1
                while f"{path}_{suffix}" in used_paths:
                    suffix += 1
                path = f"{path}_{suffix}"
            used_paths.add(path)
            yield path, child
            yield from visit(child, path + "/")

    yield from visit(model, "")


def find_norm_layers(model):
    """`[(path, layer)]` for every norm layer in `model` (see `is_norm_layer`).

    Norms are found wherever they live: as nodes of functional and
    Sequential models, nested models, and attributes (or lists and dicts)
    of subclassed layers at any depth, such as a keras.io-style
    `TransformerBlock(layers.Layer)`'s `self.layernorm1` or keras-hub's
    `TransformerEncoder`. Besides tfnorm's and Keras's own norms this
    includes keras-hub's RMS norm classes (Llama's `LlamaLayerNorm`,
    Gemma's `RMSNormalization`, ...), recognised by class without importing
    keras-hub. Paths are as `walk_layers` gives them, e.g.
    `transformer_layer_0/self_attention_layer_norm`.
    """
    return [(path, layer) for path, layer in walk_layers(model) if is_norm_layer(layer)]


def select_layers(model, layers, argument="layers"):
    """`[(path, layer)]` for `layers`: "norms" or a list of paths, names or layers."""
    check_layer_selection(layers, argument)
    if isinstance(layers, str):
        return find_norm_layers(model)
    everything = list(walk_layers(model))
    selected = []
    for wanted in layers:
        matches = [
            (path, layer)
            for path, layer in everything
            if layer is wanted or path == wanted or layer.name == wanted
        ]
        if not matches:
            raise ValueError(
                f"`{argument}` names a layer that is not in model "
                f"{model.name!r} (its layers: {[p for p, _ in everything]}). "
                f"Received: {wanted!r}"
            )
        selected.extend(m for m in matches if m not in selected)
    return selected


def check_layer_selection(layers, argument="layers"):
    """Raises unless `layers` is "norms" or a list or tuple (of paths, names
    or layers, which only the model can tell apart)."""
    if isinstance(layers, str) and layers == "norms":
        return
    if isinstance(layers, str) or not isinstance(layers, (list, tuple)):
        raise ValueError(
            f'`{argument}` must be "norms" or a list of layer paths, names or '
            f"layers. Received: {argument}={layers!r}"
        )


def find_weighted_layers(model):
    """`[(path, layer, variables)]`: each layer with the trainable variables it owns.

    A composite layer's own variables exclude those of its sublayers, so each
    variable is counted under exactly one layer.
    """
    entries = []
    for path, layer in walk_layers(model):
        if not layer.trainable:
            continue
        nested = {
            id(v)
            for child in sublayers(layer, recursive=False)
            for v in child.trainable_weights
        }
        own = [v for v in layer.trainable_weights if id(v) not in nested]
        if own:
            entries.append((path, layer, own))
    return entries


def norm_statistic(layer):
    """What states the per-row statistic of the norm layer `layer`.

    The returned object has `row_statistic(x)` and `row_statistic_name`
    (see `tfnorm.layers.BaseNormalization.row_statistic`). tfnorm's norms
    state their own; Keras's LayerNormalization and RMSNormalization are
    read through the tfnorm norm with the same formula and `axis`, and
    keras-hub's RMS norms through `RMSNorm` over the last axis. Compare the
    statistic with `norm_epsilon(layer)`.
    """
    if isinstance(layer, BaseNormalization):
        return layer
    if foreign_norm(layer) is not None:
        # keras-hub's RMS norms normalise the last axis.
        return RMSNorm(axis=-1, name=f"{layer.name}_statistic")
    rms = keras_rms_normalization()
    twin = RMSNorm if rms is not None and isinstance(layer, rms) else LayerNormalization
    # Keras's own epsilon need not be in tfnorm's range; the twin's is unused.
    return twin(axis=plain_axis(layer.axis), name=f"{layer.name}_statistic")


def norm_epsilon(layer):
    """The epsilon of the norm layer `layer` (a class that hard-codes it, as
    `keras_hub.layers.RMSNormalization` does, has no attribute for it), or
    None for a norm without a statistic (DyT)."""
    spec = foreign_norm(layer)
    if spec is not None:
        return foreign_epsilon(layer, spec)
    return None if layer.epsilon is None else float(layer.epsilon)

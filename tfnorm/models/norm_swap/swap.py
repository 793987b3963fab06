"""`replace_norms`: moves a trained Keras model onto tfnorm's norms and back,
wherever its norms live."""

from __future__ import annotations

import warnings

from tfnorm._keras import (
    holders,
    is_compiled,
    is_functional_subclass,
    is_graph_model,
    keras,
    rebind_attributes,
    rebind_optimizer_variables,
    replace_graph_layer,
    replace_sublayer,
    reset_step_functions,
    sublayers,
)
from tfnorm.layers.base_normalization import BaseNormalization
from tfnorm.layers.foreign import foreign_norm
from tfnorm.models.norm_swap.counterparts import (
    ConversionError,
    class_path,
    counterpart,
    found_by_class_name,
    is_keras_norm,
    replacement,
    stand_in_class,
    weights_for,
)

_TARGETS = ("tfnorm", "keras")


def replace_norms(model, to="tfnorm", inplace=False):
    """`model` with its norm layers swapped between Keras (or keras-hub) and tfnorm.

    With `to="tfnorm"`, every `keras.layers.LayerNormalization` becomes a
    `tfnorm.LayerNormalization`, every `keras.layers.RMSNormalization`
    (Keras >= 3.9) a `tfnorm.RMSNorm`, and every RMS norm class of
    keras-hub's models (Llama's `LlamaLayerNorm`, Gemma's
    `RMSNormalization`, whose scale is `1 + w`, T5's, Mistral's, Qwen's, ...;
    see `tfnorm.layers.foreign`) a `tfnorm.RMSNorm` with the same epsilon
    and scale convention (`zero_centered_gamma=True` for Gemma). Names and
    weights are kept, so the outputs stay the same (each replacement is
    checked on random inputs before it goes in). With `to="keras"`, tfnorm's
    norms become Keras's built-ins, or the keras-hub class they replaced, so
    a model trained with tfnorm can be shipped without it; a norm Keras has
    no equivalent for (ScaleNorm, RMSNorm with `center`,
    `zero_centered_gamma`, `partial` or regularizers, or any RMSNorm before
    Keras 3.9) is an error naming the layer.

    Norms are reached wherever they live: nodes of functional and Sequential
    models (nested ones too), and attributes, lists or dicts of subclassed
    layers at any depth (a keras.io-style `TransformerBlock(layers.Layer)`
    with `self.layernorm1`, keras-hub's `TransformerEncoder`,
    `TransformerDecoder` and its backbones' own blocks). Such a nested norm
    is swapped in place in its parent, which keeps calling it by the same
    attribute. tfnorm's own `TransformerEncoderBlock` is the exception: it
    records its norm in its config, so rebuild it with `norm=...` instead.

    Copy or in place: by default `model` is not changed. A Sequential or
    functional model is copied layer by layer (`clone_model`) and a
    keras-hub backbone (a functional model of its own class) from its
    config, then the copy is converted. A model that cannot be copied (a
    subclassed model, or custom layers without a complete `get_config`, as
    user code often has) is an error that says so, unless `inplace=True`:
    then `model` itself is converted and returned.

    What a saved model reloads as: norms that are nodes of a plain
    functional or Sequential model are recorded in its config, so they
    reload as tfnorm's norms (after `import tfnorm`). Norms held by a layer
    that creates them itself (a subclassed block's `__init__`/`build`,
    keras-hub's layers and backbones) are not: the reloaded layer creates
    its original norms again (Keras's LayerNormalization, `LlamaLayerNorm`,
    ...) and loads the converted norms' weights into them, so the reloaded
    model gives the same outputs, with the original norm classes. Convert it
    again after loading to train with tfnorm's norms. Checkpoints and weight
    files hold the norms the model uses, never the replaced ones.

    Compiled models: converted in place, a compiled model keeps its
    optimizer, whose state (step, moments) carries over to the new norms'
    weights, and `fit` trains them. A copy's optimizer starts afresh (a
    warning says so): Keras 3 compiles the copy with a new optimizer from
    the same config, Keras 2 leaves it uncompiled.

    Nothing is half converted: anything that cannot be converted is one
    `ValueError` naming the layer's path (e.g.
    `transformer_block/layernorm1`) and why, raised before any change, and a
    failure while swapping puts every swapped norm back.

    Args:
        model: a built Keras model.
        to: `"tfnorm"` or `"keras"`. Defaults to `"tfnorm"`.
        inplace: bool, whether to convert `model` itself instead of a copy.
            Defaults to `False`.

    Returns:
        The converted model: a new one with the same weights, or `model`
        itself with `inplace=True`.

    Example:

    >>> import numpy as np, tfnorm
    >>> import tensorflow as tf
    >>> keras = tf.keras
    >>> inputs = keras.Input((4,))
    >>> model = keras.Model(inputs, keras.layers.LayerNormalization()(inputs))
    >>> moved = tfnorm.replace_norms(model, to="tfnorm")
    >>> type(moved.layers[-1]).__module__.startswith("tfnorm")
    True
    """
    if to not in _TARGETS:
        raise ValueError(f"`to` must be one of {_TARGETS}. Received: to={to!r}")
    if not isinstance(inplace, bool):
        raise ConversionError(
            f"`inplace` must be True or False. Received: inplace={inplace!r}"
        )
    if inplace:
        _convert_in_place(model, to)
        return model
    if not is_graph_model(model):
        raise ConversionError(
            f"{type(model).__name__} '{model.name}' is a subclassed model, "
            "which replace_norms cannot copy (it has no graph to rebuild); "
            "pass inplace=True to convert it in place. "
            f"Received: model={model.name!r}"
        )
    # Everything is checked on the original first, so an unconvertible norm
    # is named before any copying.
    _plan(model, to)
    if is_functional_subclass(model):
        copy = _copy_from_config(model)
    else:
        copy = _clone(model, to)
    _convert_in_place(copy, to)
    if is_compiled(model):
        # Keras 3's clone_model compiles the copy with a new optimizer from
        # the original's config; tf_keras's and a config copy do not compile.
        how = (
            "compiled with a new optimizer"
            if is_compiled(copy)
            else "uncompiled: compile it before training"
        )
        warnings.warn(
            f"replace_norms returns a copy of compiled model '{model.name}' "
            f"whose optimizer starts afresh (step 0, no moments), {how}; "
            "pass inplace=True to keep the model's optimizer and its state.",
            stacklevel=2,
        )
    return copy


def _copy_from_config(model):
    """A copy of a functional model of its own class (a keras-hub backbone),
    from its config, with its weights."""
    try:
        copy = type(model).from_config(model.get_config())
        copy.set_weights(model.get_weights())
    except Exception as error:  # Keras raises all kinds here.
        raise ConversionError(
            f"{type(model).__name__} '{model.name}' cannot be copied from its "
            f"config ({type(error).__name__}: {error}); pass inplace=True to "
            f"convert it in place. Received: model={model.name!r}"
        ) from error
    return copy


def _clone(model, to, prefix=""):
    pairs = []

    def clone_layer(layer):
        path = prefix + layer.name
        if is_graph_model(layer):
            return _clone(layer, to, path + "/")
        new = counterpart(layer, to, path)
        if new is None:
            new = _config_copy(layer, path)
        pairs.append((layer, new))
        return new

    new_model = keras.models.clone_model(model, clone_function=clone_layer)
    for old, new in pairs:
        # The graph also holds operations that are not layers (Keras 3's
        # mask computations), which have no weights.
        if isinstance(old, keras.layers.Layer) and old.weights:
            new.set_weights(weights_for(old, new))
    return new_model


def _config_copy(layer, path):
    try:
        return type(layer).from_config(layer.get_config())
    except Exception as error:  # Keras raises all kinds here.
        raise ConversionError(
            f"Layer '{path}' ({class_path(layer)}) cannot be rebuilt from "
            f"its config ({type(error).__name__}: {error}), as happens with "
            "custom layers without a complete `get_config`, so the model "
            "cannot be copied; pass inplace=True to convert the model in "
            f"place. Received: layer={path!r}"
        ) from error


def _wants(layer, to):
    """True if `to` would swap the norm `layer`."""
    if to == "tfnorm":
        return is_keras_norm(layer) or foreign_norm(layer) is not None
    return isinstance(layer, BaseNormalization)


def _plan(root, to):
    """`[(path, parent, norm)]` for every norm under `root` that `to` swaps.

    Raises a ValueError naming the first norm that cannot be converted, or
    held where it cannot be replaced; nothing is changed.
    """
    swaps = []
    seen = set()

    def visit(parent, prefix):
        for child in sublayers(parent, recursive=False):
            if id(child) in seen:
                continue
            seen.add(id(child))
            path = prefix + child.name
            if _wants(child, to):
                _check_convertible(child, to, path)
                _check_reachable(parent, child, path)
                swaps.append((path, parent, child))
                continue
            if _is_tfnorm_composite(child):
                _reject_hidden_norms(child, to, path)
                continue
            visit(child, path + "/")

    visit(root, "")
    return swaps


def _is_tfnorm_composite(layer):
    return type(layer).__module__.startswith("tfnorm.") and not isinstance(
        layer, BaseNormalization
    )


def _check_reachable(parent, norm, path):
    if is_graph_model(parent):
        return
    places = holders(parent, norm)
    if not places or any(
        isinstance(getattr(parent, name), tuple) for name, key in places
    ):
        raise ConversionError(
            f"Layer '{path}' is held by '{parent.name}' "
            f"({class_path(parent)}) in a way replace_norms cannot replace "
            "(a tuple, a closure or another object, not an attribute, list "
            f"or dict of the layer). Received: layer={path!r}"
        )


def _check_convertible(norm, to, path):
    # Builds (and discards) the replacement: option errors surface here.
    counterpart(norm, to, path)
    if not norm.built:
        raise ConversionError(
            f"Layer '{path}' is not built, so its weights cannot be copied; "
            f"call the model once first. Received: layer={path!r}"
        )


def _convert_in_place(root, to):
    swaps = _plan(root, to)
    done = []
    try:
        for path, parent, old in swaps:
            new = replacement(old, to, path)
            if to == "tfnorm" and found_by_class_name(parent, old, new):
                new.__class__ = stand_in_class(type(new), type(old).__name__)
            _attach(parent, old, new, path)
            done.append((parent, old, new))
    except Exception as error:
        for parent, old, new in reversed(done):
            _attach(parent, new, old, "")
        if isinstance(error, ConversionError):
            raise
        raise ConversionError(
            f"replace_norms could not swap layer '{path}' "
            f"({type(error).__name__}: {error}); the model was left as it "
            f"was. Received: layer={path!r}"
        ) from error
    if is_compiled(root):
        _retarget_training(root, done)


def _retarget_training(model, swapped):
    """Makes the compiled `model` train the new norms: its optimizer takes
    each old norm variable's state (moments, accumulators) over to the
    variable that replaced it, and `fit` traces its step again (a traced
    step keeps updating the variables it was traced with)."""
    pairs = []
    for _, old, new in swapped:
        pairs.extend(zip(old.weights, new.weights))
    rebind_optimizer_variables(model.optimizer, pairs)
    reset_step_functions(model)


def _attach(parent, old, new, path):
    if is_graph_model(parent):
        if replace_graph_layer(parent, old, new):
            rebind_attributes(parent, old, new)
            return
    elif replace_sublayer(parent, old, new):
        return
    raise ConversionError(
        f"Layer '{path}' could not be replaced in '{parent.name}'. "
        f"Received: layer={path!r}"
    )


def _reject_hidden_norms(layer, to, path):
    """Raises if tfnorm's composite `layer` holds norms that `to` would swap."""
    inner = [sub for sub in sublayers(layer) if _wants(sub, to)]
    if inner:
        names = ", ".join(f"'{sub.name}'" for sub in inner)
        raise ConversionError(
            f"Layer '{path}' ({class_path(layer)}) creates its norms "
            f"({names}) itself from its `norm` argument, which its config "
            "records: swapped in place, a saved copy would reload with the "
            "original norms. replace_norms leaves the whole model "
            "unconverted; rebuild this layer with the norm you want "
            "(tfnorm.TransformerEncoderBlock takes a `norm` argument). "
            f"Received: layer={path!r}"
        )

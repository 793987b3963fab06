"""`replace_norms`: moves a trained Keras model onto tfnorm's norms and back."""

from __future__ import annotations

import numpy as np

from tfnorm._keras import is_graph_model, keras, keras_rms_normalization, sublayers
from tfnorm.layers.base_normalization import BaseNormalization
from tfnorm.layers.layer_normalization import LayerNormalization
from tfnorm.layers.rms_norm import RMSNorm

_TARGETS = ("tfnorm", "keras")


def replace_norms(model, to="tfnorm"):
    """A copy of `model` with its norm layers swapped between Keras and tfnorm.

    With `to="tfnorm"`, every `keras.layers.LayerNormalization` becomes a
    `tfnorm.LayerNormalization` and every `keras.layers.RMSNormalization`
    (Keras >= 3.9) a `tfnorm.RMSNorm`, with the same `axis`, `epsilon`,
    options, name and weights, so the outputs stay the same. With
    `to="keras"`, tfnorm's norms become Keras's built-ins, so a model trained
    with tfnorm can be shipped without it; a norm Keras has no equivalent for
    (ScaleNorm, RMSNorm with `center`, `zero_centered_gamma`, `partial` or
    regularizers, or any RMSNorm before Keras 3.9) is an error naming the
    layer. Every other layer is copied with its weights. `model` itself is
    not changed.

    Sequential and functional models are rebuilt layer by layer, nested ones
    too. A norm held inside another layer (keras-hub's `TransformerEncoder`,
    tfnorm's `TransformerEncoderBlock`, any custom layer) cannot be swapped:
    those layers create their norms in `build` from a config that does not
    record the norm's class, so a saved copy would reload with the original
    norms. Such a layer is an error naming it and its norms; nothing is
    half converted.

    Args:
        model: a built Sequential or functional Keras model.
        to: `"tfnorm"` or `"keras"`. Defaults to `"tfnorm"`.

    Returns:
        A new model with the same weights.

    Example:

    >>> import numpy as np, tfnorm
    >>> from tfnorm._keras import keras
    >>> inputs = keras.Input((4,))
    >>> model = keras.Model(inputs, keras.layers.LayerNormalization()(inputs))
    >>> moved = tfnorm.replace_norms(model, to="tfnorm")
    >>> type(moved.layers[-1]).__module__.startswith("tfnorm")
    True
    """
    if to not in _TARGETS:
        raise ValueError(f"`to` must be one of {_TARGETS}. Received: to={to!r}")
    if not is_graph_model(model):
        raise ValueError(
            "replace_norms rebuilds Sequential and functional models; "
            f"{type(model).__name__} '{model.name}' is a subclassed model. "
            f"Received: model={model.name!r}"
        )
    return _clone(model, to)


def _clone(model, to):
    pairs = []

    def clone_layer(layer):
        if is_graph_model(layer):
            return _clone(layer, to)
        new = _converted(layer, to)
        if new is None:
            _reject_hidden_norms(layer, to)
            new = type(layer).from_config(layer.get_config())
        pairs.append((layer, new))
        return new

    new_model = keras.models.clone_model(model, clone_function=clone_layer)
    for old, new in pairs:
        if old.weights:
            new.set_weights(_weights_for(old, new))
    return new_model


def _is_keras_norm(layer):
    rms = keras_rms_normalization()
    return type(layer) is keras.layers.LayerNormalization or (
        rms is not None and type(layer) is rms
    )


def _converted(layer, to):
    """The converted copy of a norm layer (unbuilt), or None if not a norm."""
    if to == "tfnorm" and _is_keras_norm(layer):
        config = layer.get_config()
        if type(layer) is keras.layers.LayerNormalization:
            if config.pop("rms_scaling", False):
                raise ValueError(
                    f"Layer '{layer.name}' is a keras LayerNormalization with "
                    "rms_scaling=True, which tfnorm does not have (it divides "
                    "by the standard deviation without centring); use "
                    "tfnorm.RMSNorm in a new model instead. "
                    f"Received: layer={layer.name!r}"
                )
            return LayerNormalization(**config, weight_layout="keras")
        return RMSNorm(**config, weight_layout="keras")
    if to == "keras" and isinstance(layer, BaseNormalization):
        return _keras_equivalent(layer)
    return None


def _keras_equivalent(layer):
    config = layer.get_config()
    config.pop("weight_layout", None)
    if type(layer) is LayerNormalization:
        return keras.layers.LayerNormalization(**config)
    rms = keras_rms_normalization()
    unsupported = []
    if type(layer) is RMSNorm:
        if rms is None:
            unsupported.append("keras.layers.RMSNormalization (Keras >= 3.9)")
        for option, default in (
            ("center", False),
            ("scale", True),
            ("zero_centered_gamma", False),
        ):
            if config[option] != default:
                unsupported.append(f"{option}={config[option]!r}")
        if config["partial"] not in (None, 1.0):
            unsupported.append(f"partial={config['partial']!r}")
        for option in ("gamma_regularizer", "gamma_constraint"):
            if config[option] is not None:
                unsupported.append(f"{option}")
        if not unsupported:
            keep = ("name", "trainable", "dtype", "axis", "epsilon")
            return rms(**{k: v for k, v in config.items() if k in keep})
        what = ", ".join(unsupported)
    else:
        what = type(layer).__name__
    raise ValueError(
        f"Keras has no equivalent of layer '{layer.name}' "
        f"({type(layer).__name__}; missing in Keras: {what}), so it cannot "
        f"be converted to Keras's built-ins. Received: layer={layer.name!r}"
    )


def _reject_hidden_norms(layer, to):
    """Raises if `layer` holds norm sublayers that `to` would have to swap."""
    inner = [
        sub
        for sub in sublayers(layer)
        if (to == "tfnorm" and _is_keras_norm(sub))
        or (to == "keras" and isinstance(sub, BaseNormalization))
    ]
    if inner:
        names = ", ".join(f"'{sub.name}'" for sub in inner)
        raise ValueError(
            f"Layer '{layer.name}' ({type(layer).__module__}."
            f"{type(layer).__name__}) creates its norms ({names}) itself, "
            "from a config that does not record their class: swapped in "
            "place, a saved copy would reload with the original norms. "
            "replace_norms leaves the whole model unconverted; rebuild this "
            "layer with the norm you want (tfnorm.TransformerEncoderBlock "
            f"takes a `norm` argument). Received: layer={layer.name!r}"
        )


def _weights_for(old, new):
    """`old`'s weights in the shapes `new` expects (same values, same order
    of the input's dims)."""
    values = old.get_weights()
    if getattr(old, "weight_layout", "keras") == "axis_order":
        # tfnorm 0.1.0's layout: dims in `axis` order, put in place by a
        # transpose; Keras's: values in the order of the input's dims.
        values = [np.transpose(v, old._built_order) for v in values]
    return [np.reshape(v, w.shape) for v, w in zip(values, new.weights)]

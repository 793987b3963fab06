"""Reading keras-hub's `TransformerEncoder`: the options and weights of a
tfnorm block that computes the same thing.

keras-hub is never imported: a layer is recognised by its class's module and
name, so tfnorm neither requires nor pins it. `TransformerEncoderBlock.
from_keras_hub` and `tfnorm.models.encoder_from_keras_hub` build their
blocks from what this module reads.
"""

from __future__ import annotations

from tfnorm._keras import (
    built_input_shape,
    hub_encoder_sublayers,
    hub_encoder_width,
    keras,
)
from tfnorm.layers.base_normalization import BaseNormalization

#: `keras_hub.layers.TransformerEncoder`'s own options, all of which are
#: read (the initializers matter only for new weights; the copied ones
#: replace them).
_ENCODER_OPTIONS = (
    "intermediate_dim",
    "num_heads",
    "dropout",
    "activation",
    "layer_norm_epsilon",
    "kernel_initializer",
    "bias_initializer",
    "normalize_first",
)


def _class_path(layer):
    return f"{type(layer).__module__}.{type(layer).__name__}"


def is_keras_hub_encoder(layer):
    """True if `layer` is a `keras_hub.layers.TransformerEncoder` (or a
    subclass), recognised by class."""
    return any(
        cls.__name__ == "TransformerEncoder"
        and cls.__module__.split(".")[0] == "keras_hub"
        for cls in type(layer).__mro__
    )


def _activation_name(activation, path):
    name = getattr(activation, "__name__", None)
    try:
        same = isinstance(name, str) and keras.activations.get(name) is activation
    except Exception:  # Keras raises all kinds on unknown names.
        same = False
    if not same:
        raise ValueError(
            f"TransformerEncoder '{path}' uses an activation tfnorm cannot "
            "name (only Keras's built-in activations, given by name, "
            f"convert). Received: activation={activation!r}"
        )
    return name


def _check_readable(layer, path):
    if not is_keras_hub_encoder(layer):
        raise ValueError(
            "Expected a keras_hub.layers.TransformerEncoder. Received: "
            f"layer={path!r} of type {_class_path(layer)}"
        )
    if not layer.built:
        raise ValueError(
            f"TransformerEncoder '{path}' is not built, so its hidden size "
            "and weights are unknown; call it on an input (or "
            f"`build((batch, seq, hidden_dim))`) first. Received: layer={path!r}"
        )
    config = layer.get_config()
    known = set(_ENCODER_OPTIONS) | set(keras.layers.Layer().get_config())
    unknown = sorted(set(config) - known)
    if unknown:
        option = unknown[0]
        raise ValueError(
            f"TransformerEncoder '{path}' has the option `{option}`, which "
            "tfnorm.TransformerEncoderBlock has no counterpart for. "
            f"Received: {option}={config[option]!r}"
        )


def keras_hub_encoder_options(layer, path=None):
    """The `TransformerEncoderBlock` arguments that reproduce the built
    keras-hub `TransformerEncoder` `layer`.

    Args:
        layer: a built `keras_hub.layers.TransformerEncoder`.
        path: how messages name `layer`. Defaults to its name.

    Returns:
        A dict of `TransformerEncoderBlock` keyword arguments (`d_model`,
        `num_heads`, `dff`, dropouts, `norm_position`, `epsilon`,
        `activation`, `kernel_initializer`).

    Raises:
        ValueError: naming what has no counterpart in tfnorm's block (and
            its value), or saying `layer` is not a built keras-hub encoder.
    """
    path = getattr(layer, "name", repr(layer)) if path is None else path
    _check_readable(layer, path)
    shape = built_input_shape(layer)
    d_model = shape[-1] if shape else hub_encoder_width(layer)
    num_heads = layer.num_heads
    if d_model % num_heads:
        # keras-hub then uses key_dim = d_model // num_heads, an attention
        # narrower than d_model; tfnorm's block needs the full width.
        raise ValueError(
            f"TransformerEncoder '{path}': its hidden size {d_model} is not "
            "divisible by `num_heads`, which tfnorm.TransformerEncoderBlock "
            f"requires. Received: num_heads={num_heads!r}"
        )
    normalize_first = layer.normalize_first
    if normalize_first not in (True, False):
        raise ValueError(
            f"TransformerEncoder '{path}': `normalize_first` must be a bool. "
            f"Received: normalize_first={normalize_first!r}"
        )
    return {
        "d_model": int(d_model),
        "num_heads": int(num_heads),
        "dff": int(layer.intermediate_dim),
        # keras-hub's `dropout` is used on the attention probabilities and
        # on both branch outputs before their residual adds; it has no
        # dropout between the FFN's two Dense layers.
        "dropout_rate": float(layer.dropout),
        "attention_dropout": float(layer.dropout),
        "ffn_dropout": 0.0,
        "norm_position": "pre" if normalize_first else "post",
        "epsilon": float(layer.layer_norm_epsilon),
        "activation": _activation_name(layer.activation, path),
        "kernel_initializer": keras.initializers.serialize(layer.kernel_initializer),
    }


def keras_hub_option(layer, option):
    """The value of a keras-hub encoder's option as keras-hub names it
    (`hidden_dim`, `activation` by name, or any attribute)."""
    if option == "hidden_dim":
        return hub_encoder_width(layer)
    if option == "activation":
        return getattr(layer.activation, "__name__", layer.activation)
    return getattr(layer, option)


def copy_keras_hub_encoder_weights(layer, block):
    """Copies the keras-hub encoder `layer`'s weights into the built tfnorm
    `block` (attention, both norms, the two FFN Dense layers)."""
    for source, name in hub_encoder_sublayers(layer):
        target = getattr(block, name)
        if isinstance(target, BaseNormalization):
            target.set_weights_in_input_order(source.get_weights())
        else:
            target.set_weights(source.get_weights())

"""Each norm's counterpart on the other side of `replace_norms`: tfnorm's
norm for a Keras or keras-hub one, Keras's (or the keras-hub class it
replaced) for tfnorm's, built with the same weights and checked to give the
same outputs."""

from __future__ import annotations

import weakref

import numpy as np

from tfnorm._keras import (
    build_sublayer,
    built_input_shape,
    is_functional_subclass,
    keras,
    keras_rms_normalization,
    record_built_shape,
)
from tfnorm.layers.base_normalization import BaseNormalization
from tfnorm.layers.foreign import foreign_epsilon, foreign_norm
from tfnorm.layers.layer_normalization import LayerNormalization
from tfnorm.layers.rms_norm import RMSNorm

#: Largest output difference accepted between a norm and its replacement
#: (float32), checked on random inputs before each swap.
_ATOL = 1e-5


def class_path(layer):
    return f"{type(layer).__module__}.{type(layer).__name__}"


class ConversionError(ValueError):
    """A norm `replace_norms` cannot convert (as opposed to an error from
    Keras's internals, which it wraps in one of these)."""


class _Origin:
    """The class and config of the keras-hub norm a tfnorm norm replaced, so
    `to="keras"` can put that class back."""

    def __init__(self, cls, config):
        self.cls = cls
        self.config = config


# Each converted norm's `_Origin`, kept beside the layer rather than on it so
# that nothing of it enters the layer's tracked (and saved) state; an entry
# goes when its layer does.
_ORIGINS = weakref.WeakKeyDictionary()


def replacement(old, to, path):
    """The converted, built copy of the norm `old`, with its weights,
    checked to give `old`'s outputs."""
    new = counterpart(old, to, path)
    shape = built_input_shape(old)
    if shape is None:
        # keras-hub's norms and Keras's own normalise trailing axes whose
        # sizes their weights give.
        weight_shape = tuple(old.weights[0].shape) if old.weights else None
        if weight_shape is None:
            raise ConversionError(
                f"The input shape of layer '{path}' is unknown. "
                f"Received: layer={path!r}"
            )
        shape = (None,) + weight_shape
    build_sublayer(new, shape)
    record_built_shape(new, shape)
    if old.weights:
        new.set_weights(weights_for(old, new))
    _check_same_outputs(old, new, shape, path)
    return new


def _check_same_outputs(old, new, shape, path):
    if str(getattr(old, "compute_dtype", "float32")) != "float32":
        return  # the check is for float32; half types round differently.
    rng = np.random.default_rng(0)
    x = (rng.standard_normal([d or 3 for d in shape]) * 2.0 + 0.5).astype("float32")
    expected = np.asarray(old(x))
    actual = np.asarray(new(x))
    error = float(np.max(np.abs(expected - actual))) if expected.size else 0.0
    if not error <= _ATOL:
        raise ConversionError(
            f"Layer '{path}' ({class_path(old)}) and its replacement "
            f"{type(new).__name__} disagree by {error:.3g} on random inputs "
            f"(more than {_ATOL}): its formula is not the one tfnorm assumed "
            f"for this class, so it is not converted. Received: layer={path!r}"
        )


def is_keras_norm(layer):
    rms = keras_rms_normalization()
    return type(layer) is keras.layers.LayerNormalization or (
        rms is not None and type(layer) is rms
    )


def counterpart(layer, to, path):
    """The converted copy of a norm layer (unbuilt), or None if not a norm."""
    if to == "tfnorm" and foreign_norm(layer) is not None:
        return _from_foreign(layer, path)
    if to == "tfnorm" and is_keras_norm(layer):
        config = layer.get_config()
        if type(layer) is keras.layers.LayerNormalization:
            if config.pop("rms_scaling", False):
                raise ConversionError(
                    f"Layer '{path}' is a keras LayerNormalization with "
                    "rms_scaling=True, which tfnorm does not have (it divides "
                    "by the standard deviation without centring); use "
                    "tfnorm.RMSNorm in a new model instead. "
                    f"Received: layer={path!r}"
                )
            return LayerNormalization(**config, weight_layout="keras")
        return RMSNorm(**config, weight_layout="keras")
    if to == "keras" and isinstance(layer, BaseNormalization):
        origin = _ORIGINS.get(layer)
        if origin is not None:
            return origin.cls.from_config(dict(origin.config, name=layer.name))
        return _keras_equivalent(layer, path)
    return None


def _from_foreign(layer, path):
    spec = foreign_norm(layer)
    try:
        config = layer.get_config()
    except Exception:  # a class without get_config of its own (Gemma's)
        config = None
    if config is None and isinstance(spec.epsilon, str):
        # Such classes take `epsilon` and the base arguments only.
        config = {
            "name": layer.name,
            "epsilon": foreign_epsilon(layer, spec),
            "dtype": layer.dtype_policy,
            "trainable": layer.trainable,
        }
    new = RMSNorm(
        axis=-1,
        epsilon=foreign_epsilon(layer, spec),
        zero_centered_gamma=spec.zero_centered,
        name=layer.name,
        dtype=layer.dtype_policy,
    )
    if config is not None:
        _ORIGINS[new] = _Origin(type(layer), config)
    return new


def found_by_class_name(parent, old, new):
    """True if a `.keras` file would look `new` up under `old`'s class name.

    Keras 3 files the weights of a functional model's layers under their
    class names (`layers/llama_layer_norm`), and a functional model of its
    own class whose config records no layers (keras-hub's backbones)
    reloads with the original class, so a norm of another class name would
    not get its weights back.
    """
    if type(old).__name__ == type(new).__name__ or not is_functional_subclass(parent):
        return False
    try:
        return "layers" not in parent.get_config()
    except Exception:  # Keras raises all kinds here.
        return False


#: `(tfnorm class, name) -> subclass`: see `stand_in_class`.
_STAND_INS = {}


def stand_in_class(base, name):
    """A subclass of the tfnorm norm `base` named `name`, adding nothing.

    It makes a replacement norm file its weights where the reloaded model
    looks for the norm it replaced (see `found_by_class_name`); its config
    and formula are `base`'s.
    """
    key = (base, name)
    if key not in _STAND_INS:
        _STAND_INS[key] = type(
            name,
            (base,),
            {
                "__module__": base.__module__,
                "__doc__": f"`{base.__name__}`, named `{name}` after the norm "
                "it replaced, so saved weights find their way back.",
                "tfnorm_class": base,
            },
        )
    return _STAND_INS[key]


def _tfnorm_class(layer):
    return getattr(type(layer), "tfnorm_class", type(layer))


def _keras_equivalent(layer, path):
    config = layer.get_config()
    config.pop("weight_layout", None)
    if _tfnorm_class(layer) is LayerNormalization:
        return keras.layers.LayerNormalization(**config)
    rms = keras_rms_normalization()
    unsupported = []
    if _tfnorm_class(layer) is RMSNorm:
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
    raise ConversionError(
        f"Keras has no equivalent of layer '{path}' "
        f"({type(layer).__name__}; missing in Keras: {what}), so it cannot "
        f"be converted to Keras's built-ins. Received: layer={path!r}"
    )


def weights_for(old, new):
    """`old`'s weights in the shapes `new` expects (same values, same order
    of the input's dims)."""
    if isinstance(old, BaseNormalization):
        values = old.weights_in_input_order()
    else:
        values = old.get_weights()
    return [np.reshape(v, w.shape) for v, w in zip(values, new.weights)]

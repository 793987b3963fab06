"""`get_norm`: one way for the rest of tfnorm (and users) to pick a norm."""

from __future__ import annotations

from tfnorm._keras import Layer, keras
from tfnorm.layers.base_normalization import BaseNormalization
from tfnorm.layers.layer_normalization import LayerNormalization
from tfnorm.layers.rms_norm import RMSNorm
from tfnorm.layers.scale_norm import ScaleNorm

_BY_NAME = {
    "layer": LayerNormalization,
    "layernorm": LayerNormalization,
    "rms": RMSNorm,
    "rmsnorm": RMSNorm,
    "scale": ScaleNorm,
    "scalenorm": ScaleNorm,
}
# What a norm *name* means: the Transformer setting. LayerNormalization's own
# default epsilon is Keras's 1e-3 (it is a drop-in for Keras's layer), but
# the original Transformer, PyTorch and keras-hub use 1e-5, and so do
# tfnorm's encoders and `tfnorm train`, which pick norms by name.
_NAME_DEFAULTS = {LayerNormalization: {"epsilon": 1e-5}}
_BY_CLASS_NAME = {cls.__name__: cls for cls in (LayerNormalization, RMSNorm, ScaleNorm)}
_CHOICES = (
    '"layer", "rms", "scale" (or "layernorm", "rmsnorm", "scalenorm"), a layer '
    "config dict ({'class_name': ..., 'config': {...}}), a normalisation layer "
    "class or a layer instance"
)


def get_norm(spec="layer", **overrides):
    """Returns a new, unbuilt normalisation layer described by `spec`.

    Args:
        spec: a name (`"layer"`, `"rms"`, `"scale"`, or the aliases
            `"layernorm"`, `"rmsnorm"`, `"scalenorm"`; case-insensitive;
            `"layer"` gives `epsilon=1e-5`, the Transformer setting, where
            the class itself defaults to Keras's `1e-3`), a
            Keras layer config dict as `keras.layers.serialize` writes it
            (tfnorm's layers, or Keras's own LayerNormalization /
            RMSNormalization), a layer class, or a layer instance. An
            instance is a template: a fresh copy is returned, so two norms
            built from one spec never share weights.
        **overrides: constructor arguments that replace the spec's (e.g.
            `epsilon=1e-6`, `name="attention_norm"`). An `epsilon=None`
            override is ignored, meaning "the layer's default".

    Returns:
        A new Keras layer.

    Example:

    >>> import tfnorm
    >>> tfnorm.get_norm("rms", epsilon=1e-5).epsilon
    1e-05
    """
    overrides = {
        k: v for k, v in overrides.items() if not (k == "epsilon" and v is None)
    }
    if isinstance(spec, str):
        cls = _BY_NAME.get(spec.lower()) or _BY_CLASS_NAME.get(spec)
        if cls is None:
            raise ValueError(f"Unknown norm {spec!r}. Choose one of: {_CHOICES}.")
        return cls(**{**_NAME_DEFAULTS.get(cls, {}), **overrides})
    if isinstance(spec, dict):
        return _from_config_dict(spec, overrides)
    if isinstance(spec, type) and issubclass(spec, Layer):
        return spec(**overrides)
    if isinstance(spec, Layer):
        config = spec.get_config()
        config.pop("name", None)
        config.update(overrides)
        return type(spec).from_config(config)
    raise ValueError(f"Unknown norm {spec!r}. Choose one of: {_CHOICES}.")


def _from_config_dict(spec, overrides):
    if "class_name" not in spec:
        raise ValueError(
            f"A norm config dict needs 'class_name' and 'config' keys, as "
            f"keras.layers.serialize writes them. Received: {spec!r}. "
            f"Choose one of: {_CHOICES}."
        )
    config = dict(spec.get("config") or {})
    config.update(overrides)
    name = str(spec.get("registered_name") or spec["class_name"])
    # "tfnorm>X" is how our layers register; a bare "LayerNormalization" is
    # Keras's own layer, which `keras.layers.deserialize` rebuilds.
    if name.startswith("tfnorm>") and name[len("tfnorm>") :] in _BY_CLASS_NAME:
        return _BY_CLASS_NAME[name[len("tfnorm>") :]].from_config(config)
    if name.lower() in _BY_NAME:
        return _BY_NAME[name.lower()].from_config(config)
    return keras.layers.deserialize({**spec, "config": config})


def _keras_norm_classes():
    classes = [keras.layers.LayerNormalization]
    if hasattr(keras.layers, "RMSNormalization"):
        classes.append(keras.layers.RMSNormalization)
    return tuple(classes)


def is_norm_layer(layer):
    """True for tfnorm's norms and Keras's own LayerNormalization/RMSNormalization."""
    return isinstance(layer, (BaseNormalization,) + _keras_norm_classes())

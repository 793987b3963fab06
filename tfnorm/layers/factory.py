"""`get_norm`: one way for the rest of tfnorm (and users) to pick a norm."""

from __future__ import annotations

from tfnorm._keras import Layer, keras, keras_norm_classes, serialized_class_name
from tfnorm.choices import NORMS, norm_choice, spelled_out
from tfnorm.layers.arguments import FLOAT32_NORMAL_RANGE, validate_bool
from tfnorm.layers.base_normalization import BaseNormalization
from tfnorm.layers.foreign import foreign_norm
from tfnorm.layers.registry import norm_by_name, registered_norms


def _choices():
    names = spelled_out(
        [f'"{name}"' for name in NORMS]
        + [f'"{a}"' for c in NORMS.values() for a in c.aliases]
    )
    return (
        f"{names}, a layer config dict ({{'class_name': ..., 'config': {{...}}}}), "
        "a normalisation layer class or a layer instance"
    )


def get_norm(spec="layer", **overrides):
    """Returns a new, unbuilt normalisation layer described by `spec`.

    Args:
        spec: a name from `tfnorm.choices.NORMS` (`"layer"`, `"rms"`,
            `"scale"`, `"dyt"`, or the aliases `"layernorm"`, ...;
            case-insensitive; `"layer"` gives `epsilon=1e-5`, the
            Transformer setting, where the class itself defaults to Keras's
            `1e-3`), a
            Keras layer config dict as `keras.layers.serialize` writes it
            (tfnorm's layers, or Keras's own LayerNormalization /
            RMSNormalization), a layer class, or a layer instance. An
            instance is a template: a fresh copy is returned, so two norms
            built from one spec never share weights. Whatever the form, it
            must describe a normalisation layer (see `is_norm_layer`): any
            other layer is an error.
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
    return norm_from_spec(spec, "spec", **overrides)


class NormSpecError(ValueError, TypeError):
    """A norm spec, or an override of it, that makes no norm layer (a
    ValueError, and a TypeError where a layer's `from_config` raised one).

    `argument` names the argument to blame: the caller's name for the spec
    (`norm_from_spec`'s `argument`), or the override whose value the layer
    refused (e.g. `"epsilon"`), so that a caller reports the right setting
    without reading the message.
    """

    def __init__(self, message, argument):
        super().__init__(message)
        self.argument = argument


def norm_from_spec(spec, argument, **overrides):
    """`get_norm(spec, **overrides)` for a caller whose own argument is
    called `argument` (e.g. `"norm"`), which its error messages then name.

    Raises:
        NormSpecError: a spec or override that makes no norm; its
            `argument` is `argument`, or the override's name when the spec
            alone makes a norm but not with that override.
    """
    overrides = {
        k: v for k, v in overrides.items() if not (k == "epsilon" and v is None)
    }
    try:
        return _norm_from_spec(spec, argument, overrides)
    except NormSpecError:
        raise
    except (ValueError, TypeError) as error:
        blamed = _blamed_override(spec, argument, overrides)
        raise NormSpecError(str(error), blamed or argument) from None


def _norm_from_spec(spec, argument, overrides):
    if isinstance(spec, str):
        found = norm_by_name(spec)
        if found is None:
            raise _unknown(spec, argument)
        cls, name_defaults = found
        return cls(**{**name_defaults, **overrides})
    if isinstance(spec, dict):
        return _checked(_from_config_dict(spec, overrides, argument), spec, argument)
    if isinstance(spec, type) and issubclass(spec, Layer):
        _checked(spec, spec, argument)
        return spec(**overrides)
    if isinstance(spec, Layer):
        _checked(spec, spec, argument)
        config = spec.get_config()
        config.pop("name", None)
        config.update(overrides)
        return type(spec).from_config(config)
    raise _unknown(spec, argument)


def _blamed_override(spec, argument, overrides):
    """The override the layer refused, when the spec alone makes a norm:
    the first one that fails on its own (None: the spec is to blame)."""
    try:
        _norm_from_spec(spec, argument, {})
    except (ValueError, TypeError):
        return None
    for key, value in overrides.items():
        try:
            _norm_from_spec(spec, argument, {key: value})
        except (ValueError, TypeError):
            return key
    return None


def norm_takes_epsilon(spec):
    """Whether the norm `spec` names divides by a row statistic and so takes
    an `epsilon` (an unknown spec answers True and fails where it is built)."""
    if isinstance(spec, str):
        found = norm_by_name(spec)
        cls = found[0] if found else None
    elif isinstance(spec, Layer):
        cls = type(spec)
    else:
        cls = spec if isinstance(spec, type) else None
    return getattr(cls, "has_row_statistic", True)


def _unknown(spec, argument):
    return NormSpecError(
        f"Unknown norm {spec!r}. Choose one of: {_choices()}. "
        f"Received: {argument}={spec!r}",
        argument,
    )


def _checked(layer_or_class, spec, argument):
    """`layer_or_class` if it is a normalisation layer (or class); else raises."""
    cls = layer_or_class if isinstance(layer_or_class, type) else type(layer_or_class)
    if not issubclass(cls, _norm_classes()):
        raise NormSpecError(
            f"`{argument}` must describe a normalisation layer (tfnorm's "
            f"{spelled_out(c.__name__ for c in registered_norms().values())}, "
            "another BaseNormalization subclass, or Keras's own "
            f"{' or '.join(c.__name__ for c in keras_norm_classes())}); "
            f"{cls.__name__} is not one. Received: {argument}={spec!r}",
            argument,
        )
    return layer_or_class


def _from_config_dict(spec, overrides, argument):
    if "class_name" not in spec:
        raise NormSpecError(
            f"A norm config dict needs 'class_name' and 'config' keys, as "
            f"keras.layers.serialize writes them. Choose one of: {_choices()}. "
            f"Received: {argument}={spec!r}",
            argument,
        )
    config = dict(spec.get("config") or {})
    config.update(overrides)
    name = serialized_class_name(spec)
    # "tfnorm>X" is how our layers register; a bare "LayerNormalization" is
    # Keras's own layer, which `keras.layers.deserialize` rebuilds.
    if name.startswith("tfnorm>"):
        found = norm_by_name(name[len("tfnorm>") :])
        if found is not None:
            return found[0].from_config(config)
    elif norm_choice(name) is not None:
        return norm_by_name(norm_choice(name))[0].from_config(config)
    layer = keras.layers.deserialize({**spec, "config": config})
    if isinstance(layer, keras_norm_classes()):
        _check_keras_norm(layer, argument)
    return layer


def _check_keras_norm(layer, argument):
    """Checks what Keras's own norms take unchecked from a config dict.

    Keras's LayerNormalization accepts `epsilon: -1` or `0` (NaN or inf
    outputs on the first constant row) and `center: "false"` (truthy, so
    on); tfnorm's own layers refuse both, and so must a norm picked by a
    config dict.
    """
    low, high = FLOAT32_NORMAL_RANGE
    epsilon = getattr(layer, "epsilon", None)
    if (
        isinstance(epsilon, bool)
        or not isinstance(epsilon, (int, float))
        or not low <= epsilon <= high
    ):
        raise ValueError(
            f"`epsilon` of {type(layer).__name__} must be a number in about "
            f"[{low:.3g}, {high:.3g}] (float32's normal numbers; a smaller or "
            f"larger one gives NaN or all-zero outputs). Received: "
            f"{argument}.config.epsilon={epsilon!r}"
        )
    for key in ("center", "scale"):
        if hasattr(layer, key):
            try:
                validate_bool(key, getattr(layer, key))
            except ValueError:
                raise ValueError(
                    f"`{key}` of {type(layer).__name__} must be true or false. "
                    f"Received: {argument}.config.{key}={getattr(layer, key)!r}"
                ) from None


def _norm_classes():
    return (BaseNormalization,) + keras_norm_classes()


def is_norm_layer(layer):
    """True for tfnorm's norms, Keras's own LayerNormalization/RMSNormalization
    and the RMS norm classes of keras-hub's models (see
    `tfnorm.layers.foreign`; recognised by class, without importing
    keras-hub)."""
    return isinstance(layer, _norm_classes()) or foreign_norm(layer) is not None

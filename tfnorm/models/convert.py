"""`replace_norms`: moves a trained Keras model onto tfnorm's norms and back,
wherever its norms live; keras-hub encoders onto tfnorm's blocks."""

from __future__ import annotations

import warnings
import weakref

import numpy as np

from tfnorm._keras import (
    build_sublayer,
    built_input_shape,
    holders,
    hub_encoder_sublayers,
    hub_encoder_width,
    is_compiled,
    is_functional_subclass,
    is_graph_model,
    keras,
    keras_rms_normalization,
    rebind_attributes,
    rebind_optimizer_variables,
    record_built_shape,
    replace_graph_layer,
    replace_sublayer,
    reset_step_functions,
    sublayers,
)
from tfnorm.layers.base_normalization import BaseNormalization
from tfnorm.layers.foreign import foreign_epsilon, foreign_norm
from tfnorm.layers.layer_normalization import LayerNormalization
from tfnorm.layers.rms_norm import RMSNorm

_TARGETS = ("tfnorm", "keras")
#: Largest output difference accepted between a norm and its replacement
#: (float32), checked on random inputs before each swap.
_ATOL = 1e-5


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
        new = _converted(layer, to, path)
        if new is None:
            new = _config_copy(layer, path)
        pairs.append((layer, new))
        return new

    new_model = keras.models.clone_model(model, clone_function=clone_layer)
    for old, new in pairs:
        # The graph also holds operations that are not layers (Keras 3's
        # mask computations), which have no weights.
        if isinstance(old, keras.layers.Layer) and old.weights:
            new.set_weights(_weights_for(old, new))
    return new_model


def _config_copy(layer, path):
    try:
        return type(layer).from_config(layer.get_config())
    except Exception as error:  # Keras raises all kinds here.
        raise ConversionError(
            f"Layer '{path}' ({_class_path(layer)}) cannot be rebuilt from "
            f"its config ({type(error).__name__}: {error}), as happens with "
            "custom layers without a complete `get_config`, so the model "
            "cannot be copied; pass inplace=True to convert the model in "
            f"place. Received: layer={path!r}"
        ) from error


def _class_path(layer):
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


def _wants(layer, to):
    """True if `to` would swap the norm `layer`."""
    if to == "tfnorm":
        return _is_keras_norm(layer) or foreign_norm(layer) is not None
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
            f"({_class_path(parent)}) in a way replace_norms cannot replace "
            "(a tuple, a closure or another object, not an attribute, list "
            f"or dict of the layer). Received: layer={path!r}"
        )


def _check_convertible(norm, to, path):
    # Builds (and discards) the replacement: option errors surface here.
    _converted(norm, to, path)
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
            new = _replacement(old, to, path)
            if to == "tfnorm" and _found_by_class_name(parent, old, new):
                new.__class__ = _stand_in_class(type(new), type(old).__name__)
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


def _replacement(old, to, path):
    """The converted, built copy of the norm `old`, with its weights,
    checked to give `old`'s outputs."""
    new = _converted(old, to, path)
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
        new.set_weights(_weights_for(old, new))
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
            f"Layer '{path}' ({_class_path(old)}) and its replacement "
            f"{type(new).__name__} disagree by {error:.3g} on random inputs "
            f"(more than {_ATOL}): its formula is not the one tfnorm assumed "
            f"for this class, so it is not converted. Received: layer={path!r}"
        )


def _is_keras_norm(layer):
    rms = keras_rms_normalization()
    return type(layer) is keras.layers.LayerNormalization or (
        rms is not None and type(layer) is rms
    )


def _converted(layer, to, path):
    """The converted copy of a norm layer (unbuilt), or None if not a norm."""
    if to == "tfnorm" and foreign_norm(layer) is not None:
        return _from_foreign(layer, path)
    if to == "tfnorm" and _is_keras_norm(layer):
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


def _found_by_class_name(parent, old, new):
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


#: `(tfnorm class, name) -> subclass`: see `_stand_in_class`.
_STAND_INS = {}


def _stand_in_class(base, name):
    """A subclass of the tfnorm norm `base` named `name`, adding nothing.

    It makes a replacement norm file its weights where the reloaded model
    looks for the norm it replaced (see `_found_by_class_name`); its config
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


def _reject_hidden_norms(layer, to, path):
    """Raises if tfnorm's composite `layer` holds norms that `to` would swap."""
    inner = [sub for sub in sublayers(layer) if _wants(sub, to)]
    if inner:
        names = ", ".join(f"'{sub.name}'" for sub in inner)
        raise ConversionError(
            f"Layer '{path}' ({_class_path(layer)}) creates its norms "
            f"({names}) itself from its `norm` argument, which its config "
            "records: swapped in place, a saved copy would reload with the "
            "original norms. replace_norms leaves the whole model "
            "unconverted; rebuild this layer with the norm you want "
            "(tfnorm.TransformerEncoderBlock takes a `norm` argument). "
            f"Received: layer={path!r}"
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


# -- keras-hub encoders onto tfnorm's blocks --------------------------------

#: `keras_hub.layers.TransformerEncoder`'s own options, all of which
#: `encoder_block_from_keras_hub` reads (the initializers matter only for
#: new weights; the copied ones replace them).
_HUB_ENCODER_OPTIONS = (
    "intermediate_dim",
    "num_heads",
    "dropout",
    "activation",
    "layer_norm_epsilon",
    "kernel_initializer",
    "bias_initializer",
    "normalize_first",
)


def _is_hub_transformer_encoder(layer):
    # By class, so tfnorm need not import keras-hub (nor require it).
    return any(
        cls.__name__ == "TransformerEncoder"
        and cls.__module__.split(".")[0] == "keras_hub"
        for cls in type(layer).__mro__
    )


def _hub_activation_name(activation, path):
    name = getattr(activation, "__name__", None)
    try:
        same = isinstance(name, str) and keras.activations.get(name) is activation
    except Exception:  # Keras raises all kinds on unknown names.
        same = False
    if not same:
        raise ConversionError(
            f"TransformerEncoder '{path}' uses an activation tfnorm cannot "
            "name (only Keras's built-in activations, given by name, "
            f"convert). Received: activation={activation!r}"
        )
    return name


def _hub_encoder_options(layer, path):
    """The `TransformerEncoderBlock` arguments that reproduce the keras-hub
    `TransformerEncoder` `layer`, or a `ConversionError` naming what has no
    counterpart."""
    if not _is_hub_transformer_encoder(layer):
        raise ConversionError(
            "Expected a keras_hub.layers.TransformerEncoder. Received: "
            f"layer={path!r} of type {_class_path(layer)}"
        )
    if not layer.built:
        raise ConversionError(
            f"TransformerEncoder '{path}' is not built, so its hidden size "
            "and weights are unknown; call it on an input (or "
            f"`build((batch, seq, hidden_dim))`) first. Received: layer={path!r}"
        )
    config = layer.get_config()
    known = set(_HUB_ENCODER_OPTIONS) | set(keras.layers.Layer().get_config())
    unknown = sorted(set(config) - known)
    if unknown:
        option = unknown[0]
        raise ConversionError(
            f"TransformerEncoder '{path}' has the option `{option}`, which "
            "tfnorm.TransformerEncoderBlock has no counterpart for. "
            f"Received: {option}={config[option]!r}"
        )
    shape = built_input_shape(layer)
    d_model = shape[-1] if shape else hub_encoder_width(layer)
    num_heads = layer.num_heads
    if d_model % num_heads:
        # keras-hub then uses key_dim = d_model // num_heads, an attention
        # narrower than d_model; tfnorm's block needs the full width.
        raise ConversionError(
            f"TransformerEncoder '{path}': its hidden size {d_model} is not "
            "divisible by `num_heads`, which tfnorm.TransformerEncoderBlock "
            f"requires. Received: num_heads={num_heads!r}"
        )
    normalize_first = layer.normalize_first
    if normalize_first not in (True, False):
        raise ConversionError(
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
        "activation": _hub_activation_name(layer.activation, path),
        "kernel_initializer": keras.initializers.serialize(layer.kernel_initializer),
    }


def _copy_hub_encoder_weights(layer, block):
    for source, tfnorm_name in hub_encoder_sublayers(layer):
        target = getattr(block, tfnorm_name)
        target.set_weights(_weights_for(source, target))


def encoder_block_from_keras_hub(layer):
    """A `tfnorm.TransformerEncoderBlock` equal to a keras-hub encoder layer.

    Reads a built `keras_hub.layers.TransformerEncoder` and builds the tfnorm
    block with the same hidden size (`d_model`, from the shape `layer` was
    built with), `num_heads`, `dff` (`intermediate_dim`), activation,
    epsilon (`layer_norm_epsilon`) and norm position (`normalize_first=True`
    is `"pre"`, False `"post"`), and keras-hub's dropout sites: its
    `dropout` on the attention probabilities and on both branch outputs,
    none between the FFN's Dense layers (`ffn_dropout=0`). Then it copies
    the weights sublayer by sublayer (attention query, key, value and
    output projections, the two FFN Dense layers, both norms), so the two
    give the same outputs (in float32, up to 1e-5), with or without a
    padding mask. The norms are tfnorm's `LayerNormalization`s; rebuild the
    block from its config with another `norm` or `norm_position` to
    fine-tune it that way. `layer` is not changed. keras-hub itself is not
    imported here: `layer` is recognised by class.

    Example:

    ```python
    import keras_hub
    import numpy as np
    from tfnorm.models.convert import encoder_block_from_keras_hub

    hub = keras_hub.layers.TransformerEncoder(64, 4, normalize_first=True)
    x = np.random.rand(2, 10, 32).astype("float32")
    hub(x)  # builds it
    block = encoder_block_from_keras_hub(hub)  # norm_position="pre"
    np.testing.assert_allclose(block(x), hub(x), atol=1e-5)
    ```

    Args:
        layer: a built `keras_hub.layers.TransformerEncoder` (or a subclass
            without options of its own).

    Returns:
        A built `tfnorm.TransformerEncoderBlock` named like `layer`, with
        `layer`'s weights.

    Raises:
        ValueError: `layer` is not a built keras-hub `TransformerEncoder`,
            or one of its options has no counterpart in tfnorm's block (an
            option a subclass adds, a hidden size `num_heads` does not
            divide, an activation that is not a Keras built-in); the
            message names the option and its value.
    """
    from tfnorm.models.encoder_block import TransformerEncoderBlock

    options = _hub_encoder_options(layer, getattr(layer, "name", repr(layer)))
    block = TransformerEncoderBlock(
        name=layer.name, dtype=layer.dtype_policy, **options
    )
    block.build((None, None, options["d_model"]))
    _copy_hub_encoder_weights(layer, block)
    return block


def _hub_value(layer, option):
    if option == "hidden_dim":
        return hub_encoder_width(layer)
    if option == "activation":
        return getattr(layer.activation, "__name__", layer.activation)
    return getattr(layer, option)


def encoder_from_keras_hub(layers, name="encoder"):
    """A `tfnorm.build_encoder` model equal to a stack of keras-hub encoders.

    `layers` are built `keras_hub.layers.TransformerEncoder`s applied one
    after the other (as in keras-hub's BERT backbone, say). Each is read as
    by `encoder_block_from_keras_hub`; all must share the hidden size,
    heads, `intermediate_dim`, dropout, activation and `normalize_first`
    (the epsilon may differ per layer). The model is
    `tfnorm.build_encoder(len(layers), ...)` without a final norm: Post-LN
    blocks end on a norm, and keras-hub's Pre-LN encoders have none after
    the last block (a keras-hub model that adds one keeps it outside the
    stack). Blocks `block_0, block_1, ...` get the layers' weights, so the
    model's outputs match the stack's, with or without a padding mask
    (`model([x, padding_mask])`).

    Example:

    ```python
    import keras_hub
    import numpy as np
    from tfnorm.models.convert import encoder_from_keras_hub

    x = np.random.rand(2, 10, 32).astype("float32")
    stack = [keras_hub.layers.TransformerEncoder(64, 4) for _ in range(2)]
    y = x
    for layer in stack:
        y = layer(y)
    encoder = encoder_from_keras_hub(stack)  # Post-LN, no final norm
    np.testing.assert_allclose(encoder(x), y, atol=1e-5)
    ```

    Args:
        layers: a non-empty list of built keras-hub `TransformerEncoder`s.
        name: the model name. Defaults to `"encoder"`.

    Returns:
        A `tfnorm.models.EncoderModel` (inputs: the sequence, or
        `[sequence, padding_mask]`).

    Raises:
        ValueError: `layers` is empty, a layer cannot be converted (see
            `encoder_block_from_keras_hub`), or the layers differ in an
            option other than the epsilon (the message names it and both
            values).
    """
    from tfnorm.models.builders import build_encoder

    layers = list(layers)
    if not layers:
        raise ConversionError(
            "encoder_from_keras_hub needs at least one TransformerEncoder. "
            f"Received: layers={layers!r}"
        )
    options = [
        _hub_encoder_options(layer, f"layers[{index}] ({layer.name})")
        for index, layer in enumerate(layers)
    ]
    # Compared by keras-hub's names, which the user knows.
    shared = {
        "hidden_dim": "d_model",
        "intermediate_dim": "dff",
        "num_heads": "num_heads",
        "dropout": "dropout_rate",
        "activation": "activation",
        "normalize_first": "norm_position",
    }
    first = options[0]
    for index, other in enumerate(options[1:], start=1):
        for hub_name, key in shared.items():
            if other[key] != first[key]:
                ours, theirs = (
                    _hub_value(layers[0], hub_name),
                    _hub_value(layers[index], hub_name),
                )
                raise ConversionError(
                    "build_encoder gives every block the same options, but "
                    f"layers[0] and layers[{index}] differ in `{hub_name}`. "
                    f"Received: {hub_name}={ours!r} and {hub_name}={theirs!r}"
                )
    block_options = dict(first)
    d_model = block_options.pop("d_model")
    num_heads = block_options.pop("num_heads")
    dff = block_options.pop("dff")
    block_options.pop("epsilon")
    model = build_encoder(
        len(layers),
        d_model,
        num_heads,
        dff,
        epsilon=[o["epsilon"] for o in options],
        final_norm=False,
        name=name,
        **block_options,
    )
    for index, layer in enumerate(layers):
        _copy_hub_encoder_weights(layer, model.get_layer(f"block_{index}"))
    return model

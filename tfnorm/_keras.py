"""The one place in tfnorm that knows which Keras it is running on.

`tf.keras` resolves to one of three things, and tfnorm must subclass the same
`Layer` class the user's `tf.keras` gives so that our layers mix with theirs:

* TensorFlow 2.9 to 2.15: Keras 2 (`keras` 2.x, shipped with TensorFlow).
* TensorFlow >= 2.16 with `TF_USE_LEGACY_KERAS=1` and `tf_keras` installed:
  `tf_keras`, which keeps the Keras 2 API.
* TensorFlow >= 2.16 otherwise: Keras 3.

Every other module imports `keras` and the helpers below from here instead of
testing versions itself.
"""

from __future__ import annotations

import inspect
import os

from tfnorm._tf_check import check_tensorflow

tf = check_tensorflow()

# In TensorFlow >= 2.16 `tf.keras` is a lazy loader that picks Keras 3 or
# tf_keras from TF_USE_LEGACY_KERAS on first attribute access.
keras = tf.keras


Layer = keras.layers.Layer


def _keras_package():
    # The top-level package that defines `tf.keras`'s Layer: "keras" (Keras 2
    # or 3) or "tf_keras". Its `__version__` is reliable in all three runtimes,
    # unlike attributes of the `tf.keras` API module.
    import importlib

    return importlib.import_module(Layer.__module__.split(".")[0])


KERAS_VERSION = str(_keras_package().__version__)
IS_KERAS_3 = KERAS_VERSION.startswith("3.")
if IS_KERAS_3:
    FLAVOUR = "keras3"
elif _keras_package().__name__ == "tf_keras":
    FLAVOUR = "tf_keras"
else:
    FLAVOUR = "keras2"

#: Formats `save_model` accepts in this runtime, the native one first.
if IS_KERAS_3:
    # Keras 3 still reads legacy .h5 files, but its loader drops an `axis`
    # list of more than one entry (keras/src/legacy/saving/saving_utils.py),
    # so H5 is not offered here.
    SAVE_FORMATS = ("keras",)
elif FLAVOUR == "tf_keras":
    SAVE_FORMATS = ("keras", "h5", "tf")
else:
    # Keras 2.9 has no `.keras` archive format yet.
    SAVE_FORMATS = ("tf", "h5")
NATIVE_FORMAT = SAVE_FORMATS[0]

_SUFFIX = {"keras": ".keras", "h5": ".h5", "tf": ""}


def register_serializable(cls):
    """Registers `cls` for deserialisation as `tfnorm>ClassName`."""
    return keras.utils.register_keras_serializable(package="tfnorm")(cls)


def register_model_class(cls):
    """Registers a functional `keras.Model` subclass for deserialisation.

    As `register_serializable`, and in Keras 2 under the bare class name as
    well: Keras 2 (tf_keras and 2.9) records a whole model's class by its
    bare name in `.keras`, H5 and SavedModel files, so without it a saved
    model would come back as unknown.
    """
    cls = register_serializable(cls)
    if not IS_KERAS_3:
        keras.utils.get_custom_objects()[cls.__name__] = cls
    return cls


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


def portable_layer_config(config):
    """A layer config with its dtype policy readable by this Keras.

    Keras 3 writes the policy as `{"class_name": "DTypePolicy", "config":
    {"name": ...}, ...}` and Keras 2 mixed policies as `{"class_name":
    "Policy", ...}`; neither generation reads the other's dict, but both read
    the policy name.
    """
    dtype = config.get("dtype")
    if not isinstance(dtype, dict):
        return config
    native = str(dtype.get("class_name", "")).endswith("DTypePolicy")
    if native == IS_KERAS_3:
        return config
    name = (dtype.get("config") or {}).get("name")
    return dict(config, dtype=name) if isinstance(name, str) else config


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


def serialized_class_name(config):
    """The name a layer dict from `keras.layers.serialize` is registered under.

    Keras 3 writes the registered name (`tfnorm>RMSNorm`) as
    `registered_name` and the bare class name as `class_name`; Keras 2 has
    only `class_name`, which holds the registered name.
    """
    return str(config.get("registered_name") or config["class_name"])


def accept_tensor_logs(callback):
    """Lets Keras 2 pass `callback` batch logs as tensors.

    Keras 2 converts the logs of every batch to NumPy, waiting for the
    device, unless all callbacks declare they take tensors; Keras 3 never
    converts them.
    """
    if not IS_KERAS_3:
        callback._supports_tf_logs = True


def set_global_policy(name):
    """Sets the global mixed-precision policy (e.g. "mixed_float16")."""
    keras.mixed_precision.set_global_policy(name)


def global_policy_name() -> str:
    return keras.mixed_precision.global_policy().name


#: Keras 3's optimizers clip gradients (clipnorm/global_clipnorm/clipvalue)
#: inside each replica *before* the cross-replica all-reduce, so under
#: MirroredStrategy they clip each replica's partial gradient instead of the
#: global one. Keras 2 and tf_keras aggregate first. tfnorm's optimizers
#: (tfnorm.training.optimizers) correct for it where this is True.
CLIPS_BEFORE_ALL_REDUCE = IS_KERAS_3


def loss_scale_optimizer(optimizer):
    """Wraps `optimizer` in dynamic loss scaling (needed for float16 training)."""
    if IS_KERAS_3:
        return keras.optimizers.LossScaleOptimizer(optimizer)
    return keras.mixed_precision.LossScaleOptimizer(optimizer)


def scale_loss(optimizer, loss):
    """`loss` multiplied by `optimizer`'s loss scale (unchanged without one).

    For custom training loops: Keras 3 calls it `scale_loss`, Keras 2
    `get_scaled_loss` (only on a LossScaleOptimizer).
    """
    if IS_KERAS_3:
        return optimizer.scale_loss(loss)
    if hasattr(optimizer, "get_scaled_loss"):
        return optimizer.get_scaled_loss(loss)
    return loss


def unscale_gradients(optimizer, gradients):
    """Gradients of a scaled loss divided back by the loss scale.

    Keras 3's LossScaleOptimizer unscales inside `apply_gradients`; Keras 2's
    expects the loop to call `get_unscaled_gradients` first.
    """
    if not IS_KERAS_3 and hasattr(optimizer, "get_unscaled_gradients"):
        return optimizer.get_unscaled_gradients(gradients)
    return gradients


def build_optimizer(optimizer, variables):
    """Creates `optimizer`'s slot variables for `variables` without a step.

    A checkpoint restored before the slots exist would otherwise leave the
    optimizer state behind in some runtimes. Keras 3 and tf_keras optimizers
    have `build(var_list)`; Keras 2.9's OptimizerV2 `_create_all_weights`.
    """
    inner = getattr(optimizer, "inner_optimizer", None)
    if hasattr(optimizer, "build"):
        optimizer.build(list(variables))
    elif hasattr(optimizer, "_create_all_weights"):
        optimizer._create_all_weights(list(variables))
    elif inner is not None:
        build_optimizer(inner, variables)


def checkpointable_optimizer(optimizer):
    """What `tf.train.Checkpoint(optimizer=...)` can track for `optimizer`.

    Keras 2 and Keras >= 3.1 optimizers are trackable objects themselves.
    Keras 3.0's are not (TensorFlow 2.16's images ship Keras 3.0.5), so their
    variables (iterations, learning rate, slots, loss scale) are handed over
    in a module instead; `build_optimizer` must have created them first.
    """
    if isinstance(optimizer, tf.__internal__.tracking.Trackable):
        return optimizer
    state = tf.Module(name="optimizer_state")
    state.variables_in_order = list(optimizer.variables)
    return state


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


def single_input_build_config(config):
    """`get_build_config()` of a layer whose `build` needs only its first input.

    Keras 3 records the shape of every tensor argument (`shapes_dict`) when
    a layer is called with masks as well, then rebuilds it from those as
    keyword arguments; this keeps only the first input's shape.
    """
    if config and "shapes_dict" in config:
        return {"input_shape": next(iter(config["shapes_dict"].values()))}
    return config


def model_path(path_without_suffix, save_format):
    """The file or directory name `save_model` writes for `save_format`."""
    return str(path_without_suffix) + _SUFFIX[save_format]


def save_model(model, path_without_suffix, save_format=None):
    """Saves `model` in `save_format`, by default this runtime's native one.

    Public as `tfnorm.models.save_model`. The native format is the `.keras`
    archive with Keras 3 and tf_keras, and a SavedModel directory with Keras
    2.9 (which has no `.keras` format); `tfnorm._keras.SAVE_FORMATS` lists
    what this runtime can write. `keras.models.load_model(path)` reloads the
    model after `import tfnorm`.

    Args:
        model: the Keras model to save.
        path_without_suffix: the path to write, without `.keras` / `.h5`.
        save_format: `"keras"`, `"h5"`, `"tf"` or None (native). Defaults
            to `None`.

    Returns:
        The path written: a `.keras` archive, an `.h5` file, or a SavedModel
        directory for `"tf"`.
    """
    save_format = save_format or NATIVE_FORMAT
    if save_format not in SAVE_FORMATS:
        raise ValueError(
            f"This runtime ({FLAVOUR} {KERAS_VERSION}) saves models as one of "
            f"{SAVE_FORMATS}. Received: save_format={save_format!r}"
        )
    path = model_path(path_without_suffix, save_format)
    if save_format == "tf":
        model.save(path, save_format="tf")
    else:
        model.save(path)
    return path


def describe() -> dict:
    """Versions and the active Keras flavour, for `tfnorm info` and bug reports."""
    return {
        "tensorflow": tf.__version__,
        "keras": KERAS_VERSION,
        "keras_flavour": FLAVOUR,
        "tf_use_legacy_keras": os.environ.get("TF_USE_LEGACY_KERAS", ""),
        "save_formats": list(SAVE_FORMATS),
    }


def _release(version):
    """(major, minor) of a version string such as "2.9.3" or "2.21.0-rc1"."""
    major, minor = version.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


TF_RELEASE = _release(tf.__version__)

#: Whether XLA's CPU backend runs tfnorm's matrix-vector row reductions
#: faster than the fused-kernel ops (which XLA lowers to plain reductions).
#: Measured both ways: TensorFlow 2.9's XLA is 1.6x slower on the matvecs,
#: TensorFlow 2.21's 2x faster. Releases in between were not measured; the
#: split is put at 2.16, where Keras 3 arrived.
XLA_PREFERS_MATVEC = TF_RELEASE >= (2, 16)


def in_xla_context():
    """True while tracing code that XLA compiles (`jit_compile=True`, in a
    `tf.function` or a Keras model), False in eager and plain graph mode.

    Fused TensorFlow kernels win in graph mode but are taken apart by XLA,
    which fuses simpler ops itself; tfnorm's norms pick their ops by this.
    TensorFlow 2.9 to 2.21 mark a `jit_compile` function's graph with an XLA
    control-flow context, which only this private helper reads.
    """
    from tensorflow.python.ops import control_flow_util

    return control_flow_util.GraphOrParentsInXlaContext(
        tf.compat.v1.get_default_graph()
    )
